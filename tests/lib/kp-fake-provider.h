/* tests/lib/kp-fake-provider.h: an in-memory provider behind core/provider.h, for testing the
 * core (scheduler, lifecycle, disruption) without SSH or a lab.
 *
 * It keeps the contract's promises the way a real provider must: the catalog is published
 * (kp_fake_provider_publish) and handed out by reference with a version that grows on every
 * publish that changes it (an equal one keeps catalog and version); Create refuses a NodeClaim
 * that names another node class kind or a request too large to hold (ConfigurationError), picks
 * the cheapest instance type whose allocatable holds the requests and whose requirement set and
 * one available offering's intersect the NodeClaim's, and is idempotent per NodeClaim (name and
 * uid); repair policies are Ready=False and Ready=Unknown, as Karpenter's providers; Delete is
 * fenced by name and uid (NOT_FOUND otherwise); every blocking op honours its ctx, and Create can
 * be made to take a while (kp_fake_provider_set_create_delay) so that cancellation and deadlines
 * can be tested; node_class_status answers what kp_fake_provider_set_node_class set (NotFound
 * otherwise). Ownership: the one node class kind it serves is
 * KP_FAKE_NODECLASS_GROUP/KP_FAKE_NODECLASS_KIND.
 *
 * Threads: every function and op from any thread (one mutex; Create's delay sleeps outside it). */
#ifndef KP_TESTS_FAKE_PROVIDER_H
#define KP_TESTS_FAKE_PROVIDER_H

#include <stdatomic.h>
#include <stdint.h>

#include "core/provider.h"

#define KP_FAKE_NODECLASS_GROUP "test.kpssh.dev"
#define KP_FAKE_NODECLASS_KIND "FakeNodeClass"
#define KP_FAKE_PROVIDER_ID_SCHEME "fake://"

struct kp_fake_provider;

/* How many times each op was called (ended early or not). */
struct kp_fake_provider_calls {
    atomic_uint create, delete, get, list, get_instance_types, is_drifted;
};

int kp_fake_provider_new(struct kp_fake_provider **ret) KP_WUR;
struct kp_fake_provider *kp_fake_provider_free(struct kp_fake_provider *f);
/* The provider as the core sees it (borrowed; valid while f lives). */
struct kp_provider kp_fake_provider_as_provider(struct kp_fake_provider *f);

/* Publishes types (taken over, emptied also on failure) as the catalog every supported NodePool
 * gets, under the next version. Readers holding the previous catalog keep it. 0 or -ENOMEM. */
int kp_fake_provider_publish(struct kp_fake_provider *f, struct kp_instance_types *types) KP_WUR;
/* The next Create (only) fails with r, kind and reason (a static string or NULL). */
void kp_fake_provider_fail_next_create(struct kp_fake_provider *f, int r,
                                       enum kp_provider_err_kind kind, const char *reason);
/* Create waits this long before it launches, ending early when its ctx ends. */
void kp_fake_provider_set_create_delay(struct kp_fake_provider *f, uint64_t usec);
const struct kp_fake_provider_calls *kp_fake_provider_calls(const struct kp_fake_provider *f);
/* Sets what node_class_status reports for the FakeNodeClass called name (st copied; found is
 * forced true), or forgets it (st NULL: NotFound). 0 or -ENOMEM. */
int kp_fake_provider_set_node_class(struct kp_fake_provider *f, const char *name,
                                    const struct kp_node_class_status *st) KP_WUR;
/* Tells the watch_progress watchers (at most 4) that nodeclaim's work ended, as a provider with
 * its own threads would; returns how many were told. */
size_t kp_fake_provider_progress(struct kp_fake_provider *f, const char *nodeclaim);
/* How many instances it holds. */
size_t kp_fake_provider_instances(struct kp_fake_provider *f);

#endif
