/* DESIGN: projections of SSHHost, SSHNodeClass and SSHJoinProfile, and CRD-rule validation of
 * the first two.
 *
 * What: every spec and status field that the provider reads, under the CRD's names
 * (deploy/crds; docs/api.md documents each), packed into one entry per object (api/obj.h).
 *
 * Why lenient projection plus a validator: as for the Karpenter kinds (api/obj-karpenter.c), an
 * object may predate the CRD we ship. A host whose nodeAddress is a name, or a class with a bad
 * var key, is still projected so the controller can say what to fix (a condition, an event)
 * instead of dropping it silently; only wrong JSON types, quantities and timestamps refuse it.
 * SSHHost.status.state is the field the claim lock compares and swaps, so an unknown value is
 * kept as KP_HOST_STATE_UNKNOWN and never mistaken for Available.
 *
 * SSHJoinProfile validation lives in provider/ssh/profile.c (kp_profile_validate_view): that
 * module owns the profile contract (leave mentions no KPSSH_VAR_, no template leftovers, the
 * timeout grammar), k8s/ may not include it (layers point one way), and writing the checks twice
 * would let them drift. This file only decodes the profile.
 *
 * Kept of SSHHost: labels (class, hostSelector matching), the maintenance annotation as a flag,
 * and every spec and status field; dropped: condition messages (Ready's message is
 * lastProbeError, kept once). The join profile keeps its script bytes (see obj-kpssh.h).
 *
 * Invariants: fill functions decide the same way in both pack passes and write members one by
 * one (api/obj.h). Threads: pure; any thread. */
#include "provider/ssh/obj-kpssh.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/str.h"
#include "json/json.h"

static bool empty(const char *s)
{
    return !s || !*s;
}

static int obj_generation(const json_t *obj, int64_t *ret)
{
    int r = kp_json_path_int(obj, "metadata.generation", ret);

    if (r == -ENOENT) {
        *ret = 0;
        return 0;
    }
    return r;
}

/* An optional integer member; absent is 0. */
static int obj_int64(const json_t *obj, const char *key, int64_t *ret)
{
    int r = kp_json_get_int(obj, key, ret);

    if (r == -ENOENT) {
        *ret = 0;
        return 0;
    }
    return r;
}

/* The name of a LocalObjectReference member; *ret_set says whether the reference is present. */
static int obj_ref_name(const json_t *spec, const char *key, const char **ret, bool *ret_set)
{
    json_t *ref = NULL;
    int r;

    *ret = NULL;
    if ((r = kp_obj_opt_object(spec, key, &ref)) < 0)
        return r;
    if (ret_set)
        *ret_set = ref != NULL;
    return kp_obj_opt_str(ref, "name", ret);
}

bool kp_nodepool_is_ours(const struct kp_nodepool_view *v)
{
    return kp_nodeclass_ref_is(&v->tmpl.node_class_ref, KP_KPSSH_GROUP, KP_KPSSH_NODECLASS_KIND);
}

bool kp_nodeclaim_is_ours(const struct kp_nodeclaim_view *v)
{
    return kp_nodeclass_ref_is(&v->spec.node_class_ref, KP_KPSSH_GROUP, KP_KPSSH_NODECLASS_KIND);
}

/* --- SSHHost --------------------------------------------------------------------------------- */

static const char *const host_states[] = {
    [KP_HOST_PENDING] = "Pending",         [KP_HOST_AVAILABLE] = "Available",
    [KP_HOST_CLAIMED] = "Claimed",         [KP_HOST_IN_USE] = "InUse",
    [KP_HOST_UNHEALTHY] = "Unhealthy",     [KP_HOST_LEAVING] = "Leaving",
    [KP_HOST_MAINTENANCE] = "Maintenance",
};

const char *kp_host_state_name(enum kp_host_state s)
{
    return (unsigned)s < KP_ARRAY_SIZE(host_states) ? host_states[s] : "Unknown";
}

static enum kp_host_state host_state(const char *s)
{
    if (empty(s))
        return KP_HOST_PENDING;
    for (size_t i = 0; i < KP_ARRAY_SIZE(host_states); i++)
        if (strcmp(s, host_states[i]) == 0)
            return (enum kp_host_state)i;
    return KP_HOST_STATE_UNKNOWN;
}

static int kp_sshhost_fill(const json_t *obj, struct kp_pack *p, void *view)
{
    struct kp_sshhost_view *v = view;
    json_t *spec = NULL, *status = NULL, *x = NULL, *claim = NULL;
    const char *addr = NULL, *user = NULL, *key = NULL, *naddr = NULL, *mode = NULL, *shim = NULL;
    const char *state = NULL, *cname = NULL, *cuid = NULL, *inst = NULL, *tok = NULL, *pid = NULL;
    const char *fp = NULL, *arch = NULL, *perr = NULL, *apid = NULL;
    int32_t port = 0;
    int r;

    if ((r = kp_obj_meta(obj, true, p, &v->e, &v->meta)) < 0 ||
        (r = obj_generation(obj, &v->generation)) < 0)
        return r;
    r = kp_json_pathv(obj, KP_JSON_PATH("metadata", "annotations", KP_KPSSH_ANNOTATION_MAINTENANCE),
                      &x);
    if (r < 0 && r != -ENOENT)
        return r;
    v->maintenance = r == 0;
    if (kp_json_get_object(obj, "spec", &spec) < 0)
        return -KP_EPARSE;
    if ((r = kp_obj_opt_str(spec, "address", &addr)) < 0 ||
        (r = kp_obj_opt_int32(spec, "port", KP_SSHHOST_PORT_DEFAULT, &port)) < 0 ||
        (r = kp_obj_opt_str(spec, "user", &user)) < 0 ||
        (r = obj_ref_name(spec, "sshKeySecretRef", &key, NULL)) < 0 ||
        (r = kp_obj_opt_str(spec, "nodeAddress", &naddr)) < 0 ||
        (r = kp_obj_opt_object(spec, "capacity", &x)) < 0 ||
        (r = kp_obj_resources_keep(x, p, &v->capacity)) < 0 ||
        (r = kp_obj_opt_str(spec, "execMode", &mode)) < 0 ||
        (r = kp_obj_opt_array(spec, "trustedSigners", &x)) < 0 ||
        (r = kp_obj_strings(x, p, &v->trusted_signers, &v->n_trusted_signers)) < 0 ||
        (r = kp_obj_opt_str(spec, "shimCommand", &shim)) < 0)
        return r;
    v->address = kp_pack_str(p, addr);
    v->port = port;
    v->user = kp_pack_str(p, empty(user) ? KP_SSHHOST_USER_DEFAULT : user);
    v->key_secret = kp_pack_str(p, key);
    v->node_address = kp_pack_str(p, empty(naddr) ? NULL : naddr);
    v->shim_command = kp_pack_str(p, empty(shim) ? NULL : shim);
    if (empty(mode) || strcmp(mode, "Raw") == 0)
        v->exec_mode = KP_EXEC_RAW;
    else if (strcmp(mode, "Verified") == 0)
        v->exec_mode = KP_EXEC_VERIFIED;
    else
        v->exec_mode = KP_EXEC_UNKNOWN;

    if ((r = kp_obj_opt_object(obj, "status", &status)) < 0 || !status) {
        v->state = KP_HOST_PENDING;
        return r;
    }
    if ((r = kp_obj_opt_str(status, "state", &state)) < 0 ||
        (r = kp_obj_opt_array(status, "conditions", &x)) < 0 ||
        (r = kp_obj_conditions(x, p, &v->conditions)) < 0 ||
        (r = kp_obj_opt_object(status, "claimRef", &claim)) < 0 ||
        (r = kp_obj_opt_str(claim, "name", &cname)) < 0 ||
        (r = kp_obj_opt_str(claim, "uid", &cuid)) < 0 ||
        (r = kp_obj_opt_str(status, "installedProfile", &inst)) < 0 ||
        (r = kp_obj_opt_str(status, "bootstrapTokenID", &tok)) < 0 ||
        (r = kp_obj_opt_str(status, "providerID", &pid)) < 0 ||
        (r = kp_obj_opt_str(status, "adoptedProviderID", &apid)) < 0 ||
        (r = kp_obj_opt_str(status, "hostKeyFingerprint", &fp)) < 0 ||
        (r = kp_obj_opt_object(status, "observedCapacity", &x)) < 0 ||
        (r = kp_obj_resources_keep(x, p, &v->observed_capacity)) < 0 ||
        (r = kp_obj_opt_str(status, "observedArch", &arch)) < 0 ||
        (r = obj_int64(status, "observedGeneration", &v->observed_generation)) < 0 ||
        (r = kp_obj_time(status, "lastProbeTime", &v->last_probe_usec)) < 0 ||
        (r = kp_obj_opt_str(status, "lastProbeError", &perr)) < 0)
        return r;
    v->state = host_state(state);
    /* An empty claimRef name is no claim: the lock is free. */
    v->claim_name = kp_pack_str(p, empty(cname) ? NULL : cname);
    v->claim_uid = kp_pack_str(p, empty(cuid) ? NULL : cuid);
    v->installed_profile = kp_pack_str(p, empty(inst) ? NULL : inst);
    v->bootstrap_token_id = kp_pack_str(p, empty(tok) ? NULL : tok);
    v->provider_id = kp_pack_str(p, empty(pid) ? NULL : pid);
    v->adopted_provider_id = kp_pack_str(p, empty(apid) ? NULL : apid);
    v->host_key_fingerprint = kp_pack_str(p, empty(fp) ? NULL : fp);
    v->observed_arch = kp_pack_str(p, empty(arch) ? NULL : arch);
    v->last_probe_error = kp_pack_str(p, empty(perr) ? NULL : perr);
    return 0;
}

int kp_sshhost_project(const json_t *obj, struct kp_entry **ret)
{
    return kp_obj_project(obj, kp_kind_sshhost, sizeof(struct kp_sshhost_view), kp_sshhost_fill,
                          ret);
}

int kp_sshhost_decode(const char *p, size_t n, struct kp_entry **ret)
{
    return kp_obj_decode(p, n, kp_kind_sshhost, sizeof(struct kp_sshhost_view), kp_sshhost_fill,
                         ret);
}

const char *kp_sshhost_class(const struct kp_sshhost_view *v)
{
    const char *c = kp_labels_get(&v->meta.labels, KP_KPSSH_LABEL_HOST_CLASS);

    return empty(c) ? KP_KPSSH_HOST_CLASS_DEFAULT : c;
}

const char *kp_sshhost_node_ip(const struct kp_sshhost_view *v)
{
    return v->node_address ? v->node_address : v->address;
}

/* ^[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?(\.[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?)*\.?$ */
static bool valid_dns_name(const char *s)
{
    size_t label = 0;
    char prev = 0;

    for (; *s; prev = *s++) {
        if (*s == '.') {
            if (label == 0 || prev == '-')
                return false;
            label = 0;
        } else if ((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') ||
                   (*s >= '0' && *s <= '9') || (*s == '-' && label > 0)) {
            label++;
        } else {
            return false;
        }
    }
    /* A trailing dot ends the name (label 0 after it); otherwise the last label must not end
     * with '-'. */
    return prev != 0 && prev != '-';
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

static bool is_b64(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' ||
           c == '/';
}

/* (^|\s)(<key type>)\s+AAAA[A-Za-z0-9+/]+=*(\s|$): a key type word, then the base64 blob. */
static bool valid_signer_line(const char *s)
{
    static const char *const types[] = {"ssh-ed25519",
                                        "ssh-rsa",
                                        "ecdsa-sha2-nistp256",
                                        "ecdsa-sha2-nistp384",
                                        "ecdsa-sha2-nistp521",
                                        "sk-ssh-ed25519@openssh.com",
                                        "sk-ecdsa-sha2-nistp256@openssh.com"};

    for (const char *at = s; *at; at++) {
        if (at != s && !is_space(at[-1]))
            continue;
        for (size_t i = 0; i < KP_ARRAY_SIZE(types); i++) {
            const char *q = kp_startswith(at, types[i]);
            size_t n = 0;

            if (!q || !is_space(*q))
                continue;
            while (is_space(*q))
                q++;
            if (!kp_startswith(q, "AAAA"))
                continue;
            q += 4;
            while (is_b64(q[n]))
                n++;
            while (q[n] == '=')
                n++;
            if (n > 0 && is_b64(q[0]) && (!q[n] || is_space(q[n])))
                return true;
        }
    }
    return false;
}

/* True when name is among the amounts r could not hold (reported already). */
static bool resources_bad(const struct kp_resources *r, const char *name)
{
    for (size_t i = 0; i < r->n_bad; i++)
        if (strcmp(r->bad[i].name, name) == 0)
            return true;
    return false;
}

int kp_sshhost_validate(const struct kp_sshhost_view *v, struct kp_buf *msg)
{
    struct kp_valid c;
    bool found;

    kp_valid_init(&c, msg);
    if (empty(v->address))
        kp_valid_add(&c, "spec.address: required: the IP address or DNS name kpssh dials");
    else if (strlen(v->address) > 253)
        kp_valid_add(&c, "spec.address: must be at most 253 characters");
    else if (!kp_valid_ip(v->address) && !valid_dns_name(v->address))
        kp_valid_add(&c,
                     "spec.address: \"%.63s\": address must be a bare IP address or DNS name, "
                     "without scheme, user, port or path (put the port in spec.port and the "
                     "login in spec.user)",
                     v->address);
    if (v->port < 1 || v->port > 65535)
        kp_valid_add(&c, "spec.port: %d must be between 1 and 65535 (omit it for 22)",
                     (int)v->port);
    if (strlen(v->user) > 32)
        kp_valid_add(&c, "spec.user: must be at most 32 characters");
    if (empty(v->key_secret))
        kp_valid_add(&c, "spec.sshKeySecretRef.name: sshKeySecretRef.name must name a Secret in "
                         "this namespace that holds the SSH private key under data key "
                         "privateKey");
    if (v->node_address) {
        if (strlen(v->node_address) > 45 || !kp_valid_ip(v->node_address))
            kp_valid_add(&c,
                         "spec.nodeAddress: \"%.45s\": nodeAddress must be an IP address literal "
                         "such as 10.0.0.21 or fd00::21 (kubelet --node-ip does not accept DNS "
                         "names); leave it unset to use address",
                         v->node_address);
    }
    kp_valid_resources(&c, "spec.capacity", &v->capacity);
    (void)kp_resources_get(&v->capacity, "cpu", &found);
    if (!found && !resources_bad(&v->capacity, "cpu"))
        kp_valid_add(&c, "spec.capacity: capacity must include cpu, the number of CPUs the host "
                         "offers (e.g. cpu: \"2\")");
    (void)kp_resources_get(&v->capacity, "memory", &found);
    if (!found && !resources_bad(&v->capacity, "memory"))
        kp_valid_add(&c, "spec.capacity: capacity must include memory, the memory the host "
                         "offers (e.g. memory: 4Gi)");
    if (v->exec_mode == KP_EXEC_UNKNOWN)
        kp_valid_add(&c, "spec.execMode: must be Raw or Verified");
    if (v->n_trusted_signers > 16)
        kp_valid_add(&c, "spec.trustedSigners: must have at most 16 entries, has %zu",
                     v->n_trusted_signers);
    for (size_t i = 0; i < v->n_trusted_signers; i++) {
        const char *t = v->trusted_signers[i];

        if (strlen(t) > 16384 || !valid_signer_line(t))
            kp_valid_add(&c,
                         "spec.trustedSigners[%zu]: each trustedSigners entry must be an OpenSSH "
                         "public key line such as 'ssh-ed25519 AAAAC3Nza... signer@example' "
                         "(the contents of a .pub file)",
                         i);
    }
    if (v->exec_mode == KP_EXEC_VERIFIED && v->n_trusted_signers == 0)
        kp_valid_add(&c, "spec.trustedSigners: execMode Verified requires at least one "
                         "trustedSigners entry");
    if (v->shim_command && strlen(v->shim_command) > 1024)
        kp_valid_add(&c, "spec.shimCommand: must be at most 1024 characters");
    else if (v->shim_command && v->shim_command[0] != '/')
        kp_valid_add(&c, "spec.shimCommand: shimCommand must start with an absolute path, e.g. "
                         "/opt/kpssh/kpssh-shim");

    if (v->state == KP_HOST_STATE_UNKNOWN)
        kp_valid_add(&c, "status.state: must be one of Pending, Available, Claimed, InUse, "
                         "Unhealthy, Leaving, Maintenance");
    if (v->claim_name && strlen(v->claim_name) > 253)
        kp_valid_add(&c, "status.claimRef.name: must be at most 253 characters");
    if (v->bootstrap_token_id && strlen(v->bootstrap_token_id) > 6)
        kp_valid_add(&c, "status.bootstrapTokenID: must be at most 6 characters");
    kp_valid_resources(&c, "status.observedCapacity", &v->observed_capacity);
    return kp_valid_end(&c);
}

/* --- SSHNodeClass ---------------------------------------------------------------------------- */

/* A label selector, or the reason it fails to build (kept as text; see obj-karpenter.h). */
static int obj_selector(const json_t *sel, const char *path, struct kp_pack *p, struct kp_reqs *ret,
                        const char **ret_error)
{
    struct kp_selector_error err = {0};
    struct kp_selector *s = NULL;
    char text[320]; /* our path and a static message of selector.c: no outside bytes */
    int r;

    *ret_error = NULL;
    if (sel && kp_json_typeof(sel) == KP_JSON_OBJECT) {
        r = kp_selector_from_json(sel, &s, &err);
        kp_selector_free(s);
        if (r == -EINVAL || r == -KP_ELIMIT) {
            (void)snprintf(text, sizeof(text), "%s: term %zu: %s", path, err.pos,
                           err.msg ? err.msg : "invalid selector");
            *ret_error = kp_pack_str(p, text);
            return kp_obj_label_selector(NULL, p, ret);
        }
        if (r == -ENOMEM)
            return r;
    }
    return kp_obj_label_selector(sel, p, ret);
}

static void gate_set(struct kp_taint_gate *g, const char *key, enum kp_gate_kind kind,
                     const char *ns, int32_t min_ready, const char *type, const char *status)
{
    g->taint_key = key;
    g->kind = kind;
    g->pods_namespace = ns;
    g->min_ready = min_ready;
    g->condition_type = type;
    g->condition_status = status;
}

static int obj_gates(const json_t *spec, struct kp_pack *p, struct kp_sshnodeclass_view *v)
{
    struct kp_taint_gate *gv, scratch = {0};
    json_t *arr = NULL;
    size_t n;
    int r;

    if ((r = kp_obj_opt_array(spec, "startupTaintGates", &arr)) < 0)
        return r;
    n = kp_json_array_size(arr);
    gv = kp_pack_array(p, n, sizeof(*gv));
    for (size_t i = 0; i < n; i++) {
        const json_t *g = kp_json_array_at(arr, i);
        struct kp_taint_gate *x = gv ? &gv[i] : &scratch;
        json_t *when = NULL, *pods = NULL, *cond = NULL, *sel = NULL;
        const char *key = NULL, *ns = NULL, *type = NULL, *st = NULL;
        char path[96]; /* a constant and an index */
        enum kp_gate_kind kind;
        int32_t min_ready = 1;

        if (kp_json_typeof(g) != KP_JSON_OBJECT)
            return -KP_EPARSE;
        if ((r = kp_obj_opt_str(g, "taintKey", &key)) < 0 ||
            (r = kp_obj_opt_object(g, "removeWhen", &when)) < 0 ||
            (r = kp_obj_opt_object(when, "podsReady", &pods)) < 0 ||
            (r = kp_obj_opt_object(when, "nodeCondition", &cond)) < 0)
            return r;
        kind = pods && cond ? KP_GATE_BOTH
               : pods       ? KP_GATE_PODS_READY
               : cond       ? KP_GATE_NODE_CONDITION
                            : KP_GATE_NONE;
        if (pods && ((r = kp_obj_opt_str(pods, "namespace", &ns)) < 0 ||
                     (r = kp_obj_opt_object(pods, "selector", &sel)) < 0 ||
                     (r = kp_obj_opt_int32(pods, "minReady", 1, &min_ready)) < 0))
            return r;
        (void)snprintf(path, sizeof(path),
                       "spec.startupTaintGates[%zu].removeWhen.podsReady.selector", i);
        if ((r = obj_selector(sel, path, p, &x->pods_selector, &x->pods_selector_error)) < 0)
            return r;
        if (cond && ((r = kp_obj_opt_str(cond, "type", &type)) < 0 ||
                     (r = kp_obj_opt_str(cond, "status", &st)) < 0))
            return r;
        gate_set(x, kp_pack_str(p, key), kind, kp_pack_str(p, ns), min_ready, kp_pack_str(p, type),
                 kp_pack_str(p, cond ? (st ? st : "True") : NULL));
    }
    v->gates = gv;
    v->n_gates = n;
    return 0;
}

/* ^[0-9]+(\.[0-9]+)?$ as micro-USD; -1 when the text does not match or overflows. */
static int64_t price_micro(const char *s)
{
    int64_t whole = 0, frac = 0, scale = 100000;
    size_t i = 0;

    if (!(s[0] >= '0' && s[0] <= '9'))
        return -1;
    for (; s[i] >= '0' && s[i] <= '9'; i++) {
        if (whole > (INT64_MAX / 1000000 - 9) / 10)
            return -1;
        whole = whole * 10 + (s[i] - '0');
    }
    if (s[i] == '.') {
        i++;
        if (!(s[i] >= '0' && s[i] <= '9'))
            return -1;
        for (; s[i] >= '0' && s[i] <= '9'; i++) {
            /* Digits past the micro-dollar are dropped: prices are estimates. */
            frac += (s[i] - '0') * scale;
            scale /= 10;
        }
    }
    if (s[i])
        return -1;
    return whole * 1000000 + frac;
}

/* The Ready condition's message and observedGeneration from status.conditions (already
 * shape-checked by kp_obj_conditions). */
static int obj_ready_extra(const json_t *conds, struct kp_pack *p, struct kp_sshnodeclass_view *v)
{
    const char *msg = NULL;
    int64_t gen = -1;
    int r;

    for (size_t i = 0; i < kp_json_array_size(conds); i++) {
        const json_t *c = kp_json_array_at(conds, i);
        const char *type = NULL;

        if (kp_json_get_str(c, "type", &type) < 0 || strcmp(type, "Ready") != 0)
            continue;
        if ((r = kp_obj_opt_str(c, "message", &msg)) < 0)
            return r;
        r = kp_json_get_int(c, "observedGeneration", &gen);
        if (r == -ENOENT)
            gen = -1;
        else if (r < 0)
            return r;
        break;
    }
    v->ready_message = kp_pack_str(p, msg);
    v->ready_observed_generation = gen;
    return 0;
}

static int kp_sshnodeclass_fill(const json_t *obj, struct kp_pack *p, void *view)
{
    struct kp_sshnodeclass_view *v = view;
    json_t *spec = NULL, *x = NULL, *cluster = NULL, *fin = NULL;
    const char *prof = NULL, *secret = NULL, *src = NULL, *price = NULL, *ep = NULL, *ca = NULL;
    int32_t max_pods = 0;
    int r;

    if ((r = kp_obj_meta(obj, false, p, &v->e, &v->meta)) < 0 ||
        (r = obj_generation(obj, &v->generation)) < 0)
        return r;
    r = kp_json_path_array(obj, "metadata.finalizers", &fin);
    if ((r < 0 && r != -ENOENT) ||
        (r = kp_obj_strings(fin, p, &v->finalizers, &v->n_finalizers)) < 0)
        return r;
    if (kp_json_get_object(obj, "spec", &spec) < 0)
        return -KP_EPARSE;
    if ((r = kp_obj_opt_object(spec, "hostSelector", &x)) < 0 ||
        (r = obj_selector(x, "spec.hostSelector", p, &v->host_selector, &v->host_selector_error)) <
            0 ||
        (r = obj_ref_name(spec, "joinProfileRef", &prof, NULL)) < 0 ||
        (r = kp_obj_opt_object(spec, "vars", &x)) < 0 ||
        (r = kp_obj_labels(x, NULL, p, &v->vars)) < 0 ||
        (r = obj_ref_name(spec, "joinSecretRef", &secret, &v->join_secret_set)) < 0 ||
        (r = kp_obj_opt_str(spec, "providerIDSource", &src)) < 0 ||
        (r = kp_obj_opt_str(spec, "pricePerCPUHour", &price)) < 0 ||
        (r = kp_obj_opt_object(spec, "kubeReserved", &x)) < 0 ||
        (r = kp_obj_resources_keep(x, p, &v->kube_reserved)) < 0 ||
        (r = kp_obj_opt_int32(spec, "maxPods", 0, &max_pods)) < 0 ||
        (r = kp_obj_opt_object(spec, "cluster", &cluster)) < 0 ||
        (r = kp_obj_opt_str(cluster, "endpoint", &ep)) < 0 ||
        (r = kp_obj_opt_str(cluster, "caBundle", &ca)) < 0 || (r = obj_gates(spec, p, v)) < 0)
        return r;
    v->join_profile = kp_pack_str(p, prof);
    v->join_secret = kp_pack_str(p, secret);
    if (empty(src) || strcmp(src, "Static") == 0)
        v->provider_id_source = KP_PROVIDER_ID_STATIC;
    else if (strcmp(src, "Adopt") == 0)
        v->provider_id_source = KP_PROVIDER_ID_ADOPT;
    else
        v->provider_id_source = KP_PROVIDER_ID_UNKNOWN;
    if (empty(price))
        price = KP_SSHNODECLASS_PRICE_DEFAULT;
    v->price_per_cpu_hour = kp_pack_str(p, price);
    v->price_micro_usd = price_micro(price);
    v->max_pods = max_pods;
    v->cluster_set = cluster != NULL;
    v->cluster_endpoint = kp_pack_str(p, ep);
    v->cluster_ca_bundle = kp_pack_str(p, empty(ca) ? NULL : ca);

    if ((r = kp_obj_opt_object(obj, "status", &x)) < 0 ||
        (r = kp_obj_opt_array(x, "conditions", &x)) < 0 ||
        (r = kp_obj_conditions(x, p, &v->conditions)) < 0 || (r = obj_ready_extra(x, p, v)) < 0)
        return r;
    return 0;
}

int kp_sshnodeclass_project(const json_t *obj, struct kp_entry **ret)
{
    return kp_obj_project(obj, kp_kind_sshnodeclass, sizeof(struct kp_sshnodeclass_view),
                          kp_sshnodeclass_fill, ret);
}

int kp_sshnodeclass_decode(const char *p, size_t n, struct kp_entry **ret)
{
    return kp_obj_decode(p, n, kp_kind_sshnodeclass, sizeof(struct kp_sshnodeclass_view),
                         kp_sshnodeclass_fill, ret);
}

bool kp_sshnodeclass_selects(const struct kp_sshnodeclass_view *v,
                             const struct kp_labels *host_labels)
{
    if (v->host_selector_error)
        return false;
    if (!v->host_selector.present)
        return true;
    return kp_reqs_match(&v->host_selector, host_labels);
}

static bool valid_var_key(const char *k)
{
    if (!((*k >= 'A' && *k <= 'Z') || (*k >= 'a' && *k <= 'z') || *k == '_'))
        return false;
    for (k++; *k; k++)
        if (!((*k >= 'A' && *k <= 'Z') || (*k >= 'a' && *k <= 'z') || (*k >= '0' && *k <= '9') ||
              *k == '_'))
            return false;
    return true;
}

static bool valid_base64(const char *s)
{
    size_t n = strlen(s), pad = 0;

    if (n % 4 != 0)
        return false;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];

        if (ch == '=') {
            pad++;
            if (i < n - 2 || pad > 2)
                return false;
        } else if (pad || !((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
                            (ch >= '0' && ch <= '9') || ch == '+' || ch == '/')) {
            return false;
        }
    }
    return true;
}

static void check_gates(struct kp_valid *c, const struct kp_sshnodeclass_view *v)
{
    if (v->n_gates > 16)
        kp_valid_add(c, "spec.startupTaintGates: must have at most 16 entries, has %zu",
                     v->n_gates);
    for (size_t i = 0; i < v->n_gates; i++) {
        const struct kp_taint_gate *g = &v->gates[i];

        if (empty(g->taint_key))
            kp_valid_add(c, "spec.startupTaintGates[%zu].taintKey: required", i);
        else if (strlen(g->taint_key) > 253 || !kp_valid_qualified_name(g->taint_key))
            kp_valid_add(c,
                         "spec.startupTaintGates[%zu].taintKey: \"%.63s\" is not a valid taint "
                         "key: use an optional DNS prefix and '/', then up to 63 of "
                         "A-Z a-z 0-9 - _ .",
                         i, g->taint_key);
        else if (kp_startswith(g->taint_key, "karpenter.sh/"))
            kp_valid_add(c,
                         "spec.startupTaintGates[%zu].taintKey: \"%.63s\": taintKey may not be a "
                         "karpenter.sh taint: Karpenter removes those itself",
                         i, g->taint_key);
        for (size_t j = 0; j < i && !empty(g->taint_key); j++)
            if (kp_streq(v->gates[j].taint_key, g->taint_key)) {
                kp_valid_add(c,
                             "spec.startupTaintGates[%zu].taintKey: \"%.63s\": each "
                             "startupTaintGates taintKey may appear only once (also in entry %zu)",
                             i, g->taint_key, j);
                break;
            }
        if (g->kind == KP_GATE_NONE || g->kind == KP_GATE_BOTH)
            kp_valid_add(c,
                         "spec.startupTaintGates[%zu].removeWhen: removeWhen must set exactly "
                         "one of podsReady or nodeCondition",
                         i);
        if (g->kind == KP_GATE_PODS_READY || g->kind == KP_GATE_BOTH) {
            if (empty(g->pods_namespace) || strlen(g->pods_namespace) > 63)
                kp_valid_add(c,
                             "spec.startupTaintGates[%zu].removeWhen.podsReady.namespace: "
                             "required, 1 to 63 characters",
                             i);
            if (g->pods_selector_error)
                kp_valid_add(c, "%s", g->pods_selector_error);
            else if (g->pods_selector.n == 0)
                kp_valid_add(c,
                             "spec.startupTaintGates[%zu].removeWhen.podsReady.selector: "
                             "podsReady.selector must not be empty (it would match every pod "
                             "in the namespace): set matchLabels or matchExpressions",
                             i);
            if (g->min_ready < 1)
                kp_valid_add(c,
                             "spec.startupTaintGates[%zu].removeWhen.podsReady.minReady: must "
                             "be at least 1",
                             i);
        }
        if (g->kind == KP_GATE_NODE_CONDITION || g->kind == KP_GATE_BOTH) {
            if (empty(g->condition_type) || strlen(g->condition_type) > 316)
                kp_valid_add(c,
                             "spec.startupTaintGates[%zu].removeWhen.nodeCondition.type: "
                             "required, 1 to 316 characters",
                             i);
            if (!kp_streq(g->condition_status, "True") && !kp_streq(g->condition_status, "False") &&
                !kp_streq(g->condition_status, "Unknown"))
                kp_valid_add(c,
                             "spec.startupTaintGates[%zu].removeWhen.nodeCondition.status: "
                             "must be True, False or Unknown",
                             i);
        }
    }
}

int kp_sshnodeclass_validate(const struct kp_sshnodeclass_view *v, struct kp_buf *msg)
{
    struct kp_valid c;

    kp_valid_init(&c, msg);
    if (v->host_selector_error)
        kp_valid_add(&c, "%s", v->host_selector_error);
    if (empty(v->join_profile))
        kp_valid_add(&c, "spec.joinProfileRef.name: joinProfileRef.name must name an "
                         "SSHJoinProfile (e.g. tls-bootstrap)");
    if (v->vars.n > 64)
        kp_valid_add(&c, "spec.vars: must have at most 64 entries, has %zu", v->vars.n);
    for (size_t i = 0; i < v->vars.n; i++) {
        const char *k = v->vars.v[i].key;

        if (!valid_var_key(k))
            kp_valid_add(&c,
                         "spec.vars: vars key \"%.63s\" cannot be an environment variable "
                         "name: use letters, digits and _ only, not starting with a digit (e.g. "
                         "k8sMinor)",
                         k);
        if (strlen(v->vars.v[i].value) > 2048)
            kp_valid_add(&c, "spec.vars[\"%.63s\"]: value must be at most 2048 characters", k);
    }
    if (v->join_secret_set && empty(v->join_secret))
        kp_valid_add(&c, "spec.joinSecretRef.name: joinSecretRef.name must name a Secret in the "
                         "pool namespace; remove joinSecretRef when the profile needs none");
    if (v->provider_id_source == KP_PROVIDER_ID_UNKNOWN)
        kp_valid_add(&c, "spec.providerIDSource: must be Static or Adopt");
    if (v->price_micro_usd < 0 || strlen(v->price_per_cpu_hour) > 32)
        kp_valid_add(&c,
                     "spec.pricePerCPUHour: \"%.32s\": pricePerCPUHour must be a plain decimal "
                     "number such as \"0.02\" (no sign, unit or exponent)",
                     v->price_per_cpu_hour);
    kp_valid_resources(&c, "spec.kubeReserved", &v->kube_reserved);
    for (size_t i = 0; i < v->kube_reserved.n; i++) {
        const char *k = v->kube_reserved.v[i].name;

        if (strcmp(k, "cpu") != 0 && strcmp(k, "memory") != 0 &&
            strcmp(k, "ephemeral-storage") != 0)
            kp_valid_add(&c,
                         "spec.kubeReserved: kubeReserved may only list cpu, memory and "
                         "ephemeral-storage, not \"%.63s\"",
                         k);
    }
    if (v->max_pods != 0 && (v->max_pods < 1 || v->max_pods > 65535))
        kp_valid_add(&c, "spec.maxPods: %d must be between 1 and 65535", (int)v->max_pods);
    if (v->cluster_set) {
        const char *ep = v->cluster_endpoint;

        if (empty(ep))
            kp_valid_add(&c, "spec.cluster.endpoint: required when cluster is set: the https:// "
                             "URL of the API server");
        else if (strlen(ep) > 253 || !kp_startswith(ep, "https://") || !ep[8])
            kp_valid_add(&c, "spec.cluster.endpoint: cluster.endpoint must be an https:// URL "
                             "of the API server, e.g. https://10.0.0.1:6443");
        if (v->cluster_ca_bundle) {
            if (strlen(v->cluster_ca_bundle) > 65536)
                kp_valid_add(&c, "spec.cluster.caBundle: must be at most 65536 characters");
            else if (!valid_base64(v->cluster_ca_bundle))
                kp_valid_add(&c, "spec.cluster.caBundle: must be base64 (of the PEM CA "
                                 "certificates)");
        }
    }
    check_gates(&c, v);
    return kp_valid_end(&c);
}

/* --- SSHJoinProfile -------------------------------------------------------------------------- */

static const char *const sjp_phases[KP_SJP_PHASES] = {"install", "join", "leave", "uninstall"};

static void sjp_text_set(struct kp_sjp_text *t, const char *data, size_t len)
{
    t->data = data;
    t->len = len;
}

/* One string field with its length. JSON strings cannot hold NUL here (json/ refuses \u0000),
 * so the length is the C string's. */
static int sjp_text(const json_t *obj, const char *key, struct kp_pack *p, struct kp_sjp_text *t)
{
    const char *s = NULL;
    int r;

    if ((r = kp_obj_opt_str(obj, key, &s)) < 0)
        return r;
    sjp_text_set(t, kp_pack_str(p, s), s ? strlen(s) : 0);
    return 0;
}

static int kp_sshjoinprofile_fill(const json_t *obj, struct kp_pack *p, void *view)
{
    struct kp_sshjoinprofile_view *v = view;
    struct kp_meta meta;
    json_t *spec = NULL, *scripts = NULL, *timeouts = NULL, *sigs = NULL;
    const char *version = NULL;
    int r;

    /* Labels and owners are not kept (nothing selects profiles), but meta validates the header;
     * its arrays are packed anyway, so a profile's labels cost their bytes. */
    if ((r = kp_obj_meta(obj, false, p, &v->e, &meta)) < 0 ||
        (r = obj_generation(obj, &v->generation)) < 0)
        return r;
    v->creation_usec = meta.creation_usec;
    if (kp_json_get_object(obj, "spec", &spec) < 0)
        return -KP_EPARSE;
    if ((r = kp_obj_opt_str(spec, "version", &version)) < 0 ||
        (r = kp_obj_opt_object(spec, "scripts", &scripts)) < 0 ||
        (r = kp_obj_opt_object(spec, "timeouts", &timeouts)) < 0 ||
        (r = kp_obj_opt_object(spec, "signatures", &sigs)) < 0)
        return r;
    v->version = kp_pack_str(p, version);
    for (size_t i = 0; i < KP_SJP_PHASES; i++) {
        if ((r = sjp_text(scripts, sjp_phases[i], p, &v->scripts[i])) < 0 ||
            (r = sjp_text(sigs, sjp_phases[i], p, &v->signatures[i])) < 0)
            return r;
        if (i < KP_SJP_UNINSTALL && (r = sjp_text(timeouts, sjp_phases[i], p, &v->timeouts[i])) < 0)
            return r;
    }
    return 0;
}

int kp_sshjoinprofile_project(const json_t *obj, struct kp_entry **ret)
{
    return kp_obj_project(obj, kp_kind_sshjoinprofile, sizeof(struct kp_sshjoinprofile_view),
                          kp_sshjoinprofile_fill, ret);
}

int kp_sshjoinprofile_decode(const char *p, size_t n, struct kp_entry **ret)
{
    return kp_obj_decode(p, n, kp_kind_sshjoinprofile, sizeof(struct kp_sshjoinprofile_view),
                         kp_sshjoinprofile_fill, ret);
}
