/* tests/unit/test-claim.c: the claim lock's rules (provider/ssh/claim.h) without a server: the
 * candidate order, the fence predicate, the CAS patches, and the retry rules driven through a
 * fake struct kp_claim_io that behaves like the API server's resourceVersion check. The real
 * server's side is tests/integration/test-provider.c (race of 40 Creates over 20 hosts). */
#include "kp-test.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/err.h"
#include "base/str.h"
#include "json/json.h"
#include "provider/ssh/obj-kpssh.h"
#include "k8s/status.h"
#include "provider/ssh/claim.h"

#define NS "kpssh-system"

/* The fake server's copy of one host. */
struct fhost {
    char name[16];
    unsigned rv;
    char state[16];
    char claim[32], uid[32];
    char created[32];
    const char *address; /* NULL: the name */
    unsigned writes;     /* CAS attempts on this host */
};

struct fake {
    struct fhost h[8];
    size_t n;
    int steal_on_write; /* index of a host another writer claims right before our write, or -1 */
    unsigned reads;
};

static struct kp_entry *render(const struct fhost *f)
{
    char buf[2048];
    struct kp_entry *e = NULL;
    char claim[128] = "";
    int n;

    if (f->claim[0])
        assert_true(snprintf(claim, sizeof(claim), ",\"claimRef\":{\"name\":\"%s\",\"uid\":\"%s\"}",
                             f->claim, f->uid) > 0);
    n = snprintf(buf, sizeof(buf),
                 "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"" NS "\",\"uid\":\"u-%s\","
                 "\"resourceVersion\":\"%u\",\"creationTimestamp\":\"%s\"},"
                 "\"spec\":{\"address\":\"%s\",\"sshKeySecretRef\":{\"name\":\"k\"},"
                 "\"capacity\":{\"cpu\":\"2\",\"memory\":\"1Gi\"}},"
                 "\"status\":{\"state\":\"%s\"%s}}",
                 f->name, f->name, f->rv, f->created, f->address ? f->address : f->name, f->state,
                 claim);
    assert_true(n > 0 && (size_t)n < sizeof(buf));
    assert_int_equal(kp_sshhost_decode(buf, (size_t)n, &e), 0);
    return e;
}

static struct fhost *find(struct fake *fk, const char *name)
{
    for (size_t i = 0; i < fk->n; i++)
        if (kp_streq(fk->h[i].name, name))
            return &fk->h[i];
    return NULL;
}

static int fake_write(void *ctx, const struct kp_sshhost_view *h, const json_t *patch,
                      struct kp_entry **ret_host, struct kp_error *reterr)
{
    struct fake *fk = ctx;
    struct fhost *f = find(fk, h->e.name);
    const char *rv = NULL, *s = NULL;
    json_t *v = NULL;
    char want[16];

    (void)reterr;
    if (!f)
        return -ENOENT;
    f->writes++;
    if (fk->steal_on_write >= 0 && &fk->h[fk->steal_on_write] == f) {
        /* Another claimer wins this host just before our request lands. */
        assert_int_equal(kp_strscpy(f->claim, sizeof(f->claim), "other"), 0);
        assert_int_equal(kp_strscpy(f->uid, sizeof(f->uid), "other-uid"), 0);
        assert_int_equal(kp_strscpy(f->state, sizeof(f->state), "Claimed"), 0);
        f->rv++;
        fk->steal_on_write = -1;
    }
    assert_int_equal(kp_json_pathv_str(patch, KP_JSON_PATH("metadata", "resourceVersion"), &rv), 0);
    assert_true(snprintf(want, sizeof(want), "%u", f->rv) > 0);
    if (!kp_streq(rv, want))
        return -KP_ECONFLICT;
    if (kp_json_pathv_str(patch, KP_JSON_PATH("status", "state"), &s) == 0)
        assert_int_equal(kp_strscpy(f->state, sizeof(f->state), s), 0);
    if (kp_json_pathv_str(patch, KP_JSON_PATH("status", "claimRef", "name"), &s) == 0)
        assert_int_equal(kp_strscpy(f->claim, sizeof(f->claim), s), 0);
    if (kp_json_pathv_str(patch, KP_JSON_PATH("status", "claimRef", "uid"), &s) == 0)
        assert_int_equal(kp_strscpy(f->uid, sizeof(f->uid), s), 0);
    if (kp_json_pathv(patch, KP_JSON_PATH("status"), &v) == 0) {
        struct kp_json_iter it = KP_JSON_ITER_INIT;
        const char *k;
        json_t *val;

        while (kp_json_object_next(v, &it, &k, &val))
            if (kp_streq(k, "claimRef") && kp_json_typeof(val) == KP_JSON_NULL)
                f->claim[0] = f->uid[0] = '\0'; /* released */
    }
    f->rv++;
    *ret_host = render(f);
    return 0;
}

static int fake_read(void *ctx, const char *ns, const char *name, struct kp_entry **ret_host,
                     struct kp_error *reterr)
{
    struct fake *fk = ctx;
    struct fhost *f = find(fk, name);

    (void)ns;
    (void)reterr;
    fk->reads++;
    if (!f)
        return -ENOENT;
    *ret_host = render(f);
    return 0;
}

static void fake_init(struct fake *fk, size_t n)
{
    memset(fk, 0, sizeof(*fk));
    fk->n = n;
    fk->steal_on_write = -1;
    for (size_t i = 0; i < n; i++) {
        assert_true(snprintf(fk->h[i].name, sizeof(fk->h[i].name), "h%zu", i) > 0);
        fk->h[i].rv = 10;
        assert_int_equal(kp_strscpy(fk->h[i].state, sizeof(fk->h[i].state), "Available"), 0);
        assert_true(snprintf(fk->h[i].created, sizeof(fk->h[i].created), "2026-01-0%zuT00:00:00Z",
                             1 + i) > 0);
    }
}

static void test_held_by(void **state)
{
    struct fhost f = {.name = "h",
                      .rv = 1,
                      .state = "Claimed",
                      .claim = "nc-a",
                      .uid = "uid-1",
                      .created = "2026-01-01T00:00:00Z"};
    struct kp_entry *e = render(&f);
    const struct kp_sshhost_view *h = kp_sshhost_view(e);

    (void)state;
    assert_true(kp_claim_held_by(h, "nc-a", "uid-1"));
    assert_true(kp_claim_held_by(h, "nc-a", NULL));     /* a side without uid: name decides */
    assert_false(kp_claim_held_by(h, "nc-a", "uid-2")); /* name reused by a new NodeClaim */
    assert_false(kp_claim_held_by(h, "nc-b", "uid-1"));
    kp_entry_unref(e);
    f.claim[0] = '\0';
    e = render(&f);
    assert_false(kp_claim_held_by(kp_sshhost_view(e), "nc-a", "uid-1")); /* unclaimed */
    kp_entry_unref(e);
}

static void test_candidates_order(void **state)
{
    struct fhost fh[] = {
        {.name = "b", .rv = 1, .state = "Available", .created = "2026-01-02T00:00:00Z"},
        {.name = "a", .rv = 1, .state = "Available", .created = "2026-01-02T00:00:00Z"},
        {.name = "z", .rv = 1, .state = "Available", .created = "2026-01-01T00:00:00Z"},
        {.name = "c", .rv = 1, .state = "Claimed", .claim = "x", .created = "2025-01-01T00:00:00Z"},
        {.name = "d", .rv = 1, .state = "Unhealthy", .created = "2025-01-01T00:00:00Z"},
    };
    const char *nc_json =
        "{\"metadata\":{\"name\":\"snc\",\"uid\":\"u\",\"resourceVersion\":\"1\"},"
        "\"spec\":{\"joinProfileRef\":{\"name\":\"p\"}}}";
    struct kp_entry *nc = NULL, *e[5];
    const struct kp_sshhost_view *hv[5], **c = NULL;
    size_t n = 0;

    (void)state;
    assert_int_equal(kp_sshnodeclass_decode(nc_json, strlen(nc_json), &nc), 0);
    for (size_t i = 0; i < 5; i++) {
        e[i] = render(&fh[i]);
        hv[i] = kp_sshhost_view(e[i]);
    }
    assert_int_equal(kp_claim_candidates(kp_sshnodeclass_view(nc), NS, "default", hv, 5, &c, &n),
                     0);
    assert_int_equal(n, 3);
    assert_string_equal(c[0]->e.name, "z"); /* oldest first */
    assert_string_equal(c[1]->e.name, "a"); /* then by name */
    assert_string_equal(c[2]->e.name, "b");
    kp_free(c);
    assert_int_equal(kp_claim_candidates(kp_sshnodeclass_view(nc), NS, "gpu", hv, 5, &c, &n), 0);
    assert_int_equal(n, 0);
    assert_null(c);
    for (size_t i = 0; i < 5; i++)
        kp_entry_unref(e[i]);

    /* One address, one machine: of "b" and "a" (same address, other case), only the older "b"
     * is a candidate, even while "a" still reads Available; "z" has its own address. An older
     * host with the address blocks a younger one whatever its own state ("d", Unhealthy). */
    fh[0].address = "Rack1.example";
    fh[1].address = "rack1.example";
    fh[1].created[3] = '7'; /* 2027: younger than b */
    fh[2].address = "10.0.0.9";
    fh[4].address = "10.0.0.9";
    for (size_t i = 0; i < 5; i++) {
        e[i] = render(&fh[i]);
        hv[i] = kp_sshhost_view(e[i]);
    }
    assert_int_equal(kp_claim_candidates(kp_sshnodeclass_view(nc), NS, "default", hv, 5, &c, &n),
                     0);
    assert_int_equal(n, 1);
    assert_string_equal(c[0]->e.name, "b");
    kp_free(c);
    for (size_t i = 0; i < 5; i++)
        kp_entry_unref(e[i]);
    kp_entry_unref(nc);
}

static void test_patch_shape(void **state)
{
    struct kp_claim_status st = {
        .state = KP_HOST_CLAIMED, .set_state = true, .claim_name = "nc", .claim_uid = "u1"};
    struct kp_buf b = KP_BUF_INIT(4096);
    json_t *p = NULL;

    (void)state;
    assert_int_equal(kp_claim_patch(NULL, &st, &p), -EINVAL); /* never a blind write */
    assert_int_equal(kp_claim_patch("42", &st, &p), 0);
    assert_int_equal(kp_json_dump(p, KP_JSON_SORT_KEYS, &b), 0);
    assert_string_equal(kp_buf_str(&b), "{\"metadata\":{\"resourceVersion\":\"42\"},\"status\":{"
                                        "\"claimRef\":{\"name\":\"nc\",\"uid\":\"u1\"},"
                                        "\"state\":\"Claimed\"}}");
    kp_json_unref(p);
    kp_buf_reset(&b);
    st = (struct kp_claim_status){.state = KP_HOST_UNHEALTHY,
                                  .set_state = true,
                                  .clear_claim = true,
                                  .last_probe_error = "join failed"};
    assert_int_equal(kp_claim_patch("43", &st, &p), 0);
    assert_int_equal(kp_json_dump(p, KP_JSON_SORT_KEYS, &b), 0);
    assert_string_equal(kp_buf_str(&b),
                        "{\"metadata\":{\"resourceVersion\":\"43\"},\"status\":{"
                        "\"bootstrapTokenID\":null,\"claimRef\":null,\"lastProbeError\":"
                        "\"join failed\",\"providerID\":null,\"state\":\"Unhealthy\"}}");
    kp_json_unref(p);
    kp_buf_done(&b);
}

/* Snapshot views of the fake's hosts, as a stale cache would hold them. */
static void snapshot(struct fake *fk, struct kp_entry **e, const struct kp_sshhost_view **hv)
{
    for (size_t i = 0; i < fk->n; i++) {
        e[i] = render(&fk->h[i]);
        hv[i] = kp_sshhost_view(e[i]);
    }
}

static void test_conflict_moves_on(void **state)
{
    struct fake fk;
    struct kp_claim_io io = {.write = fake_write, .read = fake_read, .ctx = &fk};
    struct kp_entry *e[3], *got = NULL;
    const struct kp_sshhost_view *hv[3];
    size_t lost = 99;

    (void)state;
    fake_init(&fk, 3);
    snapshot(&fk, e, hv);
    fk.steal_on_write = 0; /* h0 is taken by someone else under our feet */
    assert_int_equal(kp_claim_first(&io, hv, 3, "nc", "u1", &got, &lost, NULL), 0);
    assert_int_equal(lost, 1);
    assert_true(kp_streq(got->name, "h1") || kp_streq(got->name, "h2"));
    assert_string_equal(kp_sshhost_view(got)->claim_name, "nc");
    assert_int_equal(kp_sshhost_view(got)->state, KP_HOST_CLAIMED);
    assert_int_equal(fk.h[0].writes, 1);                  /* tried once, never again */
    assert_string_equal(fk.h[0].claim, "other");          /* the winner's claim is untouched */
    assert_int_equal(fk.h[1].writes + fk.h[2].writes, 1); /* one more try: it won */
    assert_int_equal(fk.reads, 0);                        /* no re-read of a lost host */
    kp_entry_unref(got);
    for (size_t i = 0; i < 3; i++)
        kp_entry_unref(e[i]);
}

static void test_all_lost_is_no_capacity(void **state)
{
    struct fake fk;
    struct kp_claim_io io = {.write = fake_write, .read = fake_read, .ctx = &fk};
    struct kp_entry *e[3], *got = NULL;
    const struct kp_sshhost_view *hv[3];
    size_t lost = 0;

    (void)state;
    fake_init(&fk, 3);
    snapshot(&fk, e, hv);
    for (size_t i = 0; i < 3; i++)
        fk.h[i].rv++; /* every host changed since the snapshot */
    assert_int_equal(kp_claim_first(&io, hv, 3, "nc", "u1", &got, &lost, NULL), -ENOSPC);
    assert_null(got);
    assert_int_equal(lost, 3);
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(fk.h[i].writes, 1);
        assert_string_equal(fk.h[i].claim, "");
        kp_entry_unref(e[i]);
    }
    assert_int_equal(kp_claim_first(&io, NULL, 0, "nc", "u1", &got, &lost, NULL), -ENOSPC);
}

/* A burst: 8 claimers with the same snapshot of 8 hosts, one after the other (each loses to the
 * writes before it). Walking the list in step, claimer k would lose k rounds (28 in all); after
 * the first lost race each goes on from a spot its uid picks, so they spread. Without contention
 * the oldest host is the one claimed. */
static void test_burst_spreads(void **state)
{
    struct fake fk;
    struct kp_claim_io io = {.write = fake_write, .read = fake_read, .ctx = &fk};
    struct kp_entry *e[8], *got = NULL;
    const struct kp_sshhost_view *hv[8];
    size_t lost = 0, total = 0, max = 0;

    (void)state;
    fake_init(&fk, 8);
    snapshot(&fk, e, hv);
    assert_int_equal(kp_claim_first(&io, hv, 8, "nc-0", "7c9e6679-7425", &got, &lost, NULL), 0);
    assert_string_equal(got->name, "h0"); /* no contention: the oldest */
    assert_int_equal(lost, 0);
    kp_entry_unref(got);
    for (unsigned k = 1; k < 8; k++) {
        char name[16], uid[32]; /* the fake keeps 31 characters */

        (void)snprintf(name, sizeof(name), "nc-%u", k);
        (void)snprintf(uid, sizeof(uid), "%08x-1f2e-%u", k * 2654435761u, k);
        got = NULL;
        assert_int_equal(kp_claim_first(&io, hv, 8, name, uid, &got, &lost, NULL), 0);
        assert_non_null(got);
        kp_entry_unref(got);
        total += lost;
        max = lost > max ? lost : max;
    }
    for (size_t i = 0; i < 8; i++) {
        assert_true(fk.h[i].claim[0]); /* every host claimed once */
        kp_entry_unref(e[i]);
    }
    print_message("# burst of 8 on 8 hosts: %zu lost rounds in all (in step: 28), worst %zu\n",
                  total, max);
    assert_true(total < 28);
}

static void test_holder_write_retries_only_while_held(void **state)
{
    struct fake fk;
    struct kp_claim_io io = {.write = fake_write, .read = fake_read, .ctx = &fk};
    struct kp_entry *e[1], *got = NULL, *held = NULL;
    const struct kp_sshhost_view *hv[1];
    struct kp_claim_status st = {.installed_profile = "p@1"};

    (void)state;
    fake_init(&fk, 1);
    snapshot(&fk, e, hv);
    assert_int_equal(kp_claim_first(&io, hv, 1, "nc", "u1", &held, NULL, NULL), 0);
    kp_entry_unref(e[0]);

    /* A third party (the probe) bumps the version: the holder re-reads and writes. */
    fk.h[0].rv++;
    assert_int_equal(kp_claim_update(&io, kp_sshhost_view(held), "nc", "u1", &st, &got, NULL), 0);
    assert_int_equal(fk.reads, 1);
    kp_entry_unref(got);
    got = NULL;

    /* The claim was released and taken by another NodeClaim: nothing is written. */
    assert_int_equal(kp_strscpy(fk.h[0].claim, sizeof(fk.h[0].claim), "nc"), 0);
    assert_int_equal(kp_strscpy(fk.h[0].uid, sizeof(fk.h[0].uid), "u2"), 0);
    fk.h[0].rv++;
    fk.h[0].writes = 0;
    assert_int_equal(
        kp_claim_release(&io, kp_sshhost_view(held), "nc", "u1", true, NULL, &got, NULL), -ESTALE);
    assert_null(got);
    assert_int_equal(fk.h[0].writes, 1); /* the one refused CAS, no second write */
    assert_string_equal(fk.h[0].uid, "u2");

    /* Release by the real holder clears the claim. */
    kp_entry_unref(held);
    held = render(&fk.h[0]);
    assert_int_equal(
        kp_claim_release(&io, kp_sshhost_view(held), "nc", "u2", false, "join failed", &got, NULL),
        0);
    assert_null(kp_sshhost_view(got)->claim_name);
    assert_int_equal(kp_sshhost_view(got)->state, KP_HOST_UNHEALTHY);
    kp_entry_unref(got);
    kp_entry_unref(held);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_held_by),
        cmocka_unit_test(test_candidates_order),
        cmocka_unit_test(test_patch_shape),
        cmocka_unit_test(test_conflict_moves_on),
        cmocka_unit_test(test_all_lost_is_no_capacity),
        cmocka_unit_test(test_burst_spreads),
        cmocka_unit_test(test_holder_write_retries_only_while_held),
    };

    return kp_test_main("claim", tests, KP_ARRAY_SIZE(tests), NULL, 0, argc, argv);
}
