/* DESIGN: unit tests for base/log.c.
 *
 * Output is captured through kp_log_set_fd() into a memfd (or a pipe, for the concurrency test)
 * and checked with a small strict JSON reader written here, so the tests stay hermetic: it
 * accepts exactly one flat object per line (string, number, true, false, null values), rejects
 * raw control characters and invalid UTF-8 inside strings, and decodes string values (including
 * \uXXXX and surrogate pairs) so a value can be compared byte for byte with what was logged.
 * Its UTF-8 check decodes code points and tests ranges, a different method from log.c's, so the
 * two do not share a blind spot. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/err.h"
#include "base/log.h"
#include "base/time.h"
#include "kp-test.h"

/* --- a strict reader for one flat JSON object ----------------------------------------------- */

#define J_MAX_FIELDS 64

struct jfield {
    char *key;  /* decoded */
    char *val;  /* decoded string, or the raw text of a number or literal */
    size_t len; /* bytes in val */
    bool is_str;
};

struct jobj {
    size_t n;
    struct jfield f[J_MAX_FIELDS];
};

static void jobj_done(struct jobj *o)
{
    size_t i;

    for (i = 0; i < o->n; i++) {
        kp_free(o->f[i].key);
        kp_free(o->f[i].val);
    }
    o->n = 0;
}

static void put_utf8(char *out, size_t *o, uint32_t cp)
{
    if (cp < 0x80) {
        out[(*o)++] = (char)cp;
    } else if (cp < 0x800) {
        out[(*o)++] = (char)(0xc0 | (cp >> 6));
        out[(*o)++] = (char)(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
        out[(*o)++] = (char)(0xe0 | (cp >> 12));
        out[(*o)++] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[(*o)++] = (char)(0x80 | (cp & 0x3f));
    } else {
        out[(*o)++] = (char)(0xf0 | (cp >> 18));
        out[(*o)++] = (char)(0x80 | ((cp >> 12) & 0x3f));
        out[(*o)++] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[(*o)++] = (char)(0x80 | (cp & 0x3f));
    }
}

/* Decodes one UTF-8 character by code point; 0 when invalid. */
static size_t decode_utf8(const unsigned char *s, size_t n, uint32_t *cp)
{
    size_t need, i;
    uint32_t v, min;

    if (s[0] < 0x80) {
        *cp = s[0];
        return 1;
    } else if ((s[0] & 0xe0) == 0xc0) {
        need = 2, v = s[0] & 0x1fu, min = 0x80;
    } else if ((s[0] & 0xf0) == 0xe0) {
        need = 3, v = s[0] & 0x0fu, min = 0x800;
    } else if ((s[0] & 0xf8) == 0xf0) {
        need = 4, v = s[0] & 0x07u, min = 0x10000;
    } else {
        return 0;
    }
    if (n < need)
        return 0;
    for (i = 1; i < need; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        v = (v << 6) | (s[i] & 0x3fu);
    }
    if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
        return 0;
    *cp = v;
    return need;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static bool read_hex4(const char *p, size_t n, uint32_t *ret)
{
    uint32_t v = 0;
    size_t i;

    if (n < 4)
        return false;
    for (i = 0; i < 4; i++) {
        int h = hexval(p[i]);

        if (h < 0)
            return false;
        v = v << 4 | (uint32_t)h;
    }
    *ret = v;
    return true;
}

/* Parses the JSON string at s[*i] (at the opening quote); a new decoded copy in *ret. */
static bool parse_string(const char *s, size_t n, size_t *i, char **ret, size_t *ret_len)
{
    char *out = kp_malloc(n + 1);
    size_t p = *i, o = 0;

    assert_non_null(out);
    if (p >= n || s[p] != '"')
        goto fail;
    p++;
    while (p < n && s[p] != '"') {
        unsigned char c = (unsigned char)s[p];

        if (c < 0x20) {
            goto fail;
        } else if (c == '\\') {
            uint32_t cp, lo;

            if (++p >= n)
                goto fail;
            switch (s[p]) {
            case '"':
                out[o++] = '"';
                p++;
                break;
            case '\\':
                out[o++] = '\\';
                p++;
                break;
            case '/':
                out[o++] = '/';
                p++;
                break;
            case 'b':
                out[o++] = '\b';
                p++;
                break;
            case 'f':
                out[o++] = '\f';
                p++;
                break;
            case 'n':
                out[o++] = '\n';
                p++;
                break;
            case 'r':
                out[o++] = '\r';
                p++;
                break;
            case 't':
                out[o++] = '\t';
                p++;
                break;
            case 'u':
                if (!read_hex4(s + p + 1, n - p - 1, &cp))
                    goto fail;
                p += 5;
                if (cp >= 0xdc00 && cp <= 0xdfff)
                    goto fail;
                if (cp >= 0xd800 && cp <= 0xdbff) {
                    if (p + 6 > n || s[p] != '\\' || s[p + 1] != 'u' ||
                        !read_hex4(s + p + 2, n - p - 2, &lo) || lo < 0xdc00 || lo > 0xdfff)
                        goto fail;
                    cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                    p += 6;
                }
                put_utf8(out, &o, cp);
                break;
            default:
                goto fail;
            }
        } else {
            uint32_t cp;
            size_t len = decode_utf8((const unsigned char *)s + p, n - p, &cp);

            if (len == 0)
                goto fail;
            memcpy(out + o, s + p, len);
            o += len;
            p += len;
        }
    }
    if (p >= n)
        goto fail;
    out[o] = '\0';
    *i = p + 1;
    *ret = out;
    *ret_len = o;
    return true;
fail:
    kp_free(out);
    return false;
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool parse_scalar(const char *s, size_t n, size_t *i, char **ret, size_t *ret_len)
{
    size_t p = *i, start = *i;
    static const char *const lits[] = {"true", "false", "null"};
    size_t k;

    for (k = 0; k < 3; k++) {
        size_t len = strlen(lits[k]);

        if (n - p >= len && memcmp(s + p, lits[k], len) == 0) {
            p += len;
            goto done;
        }
    }
    if (p < n && s[p] == '-')
        p++;
    if (p < n && s[p] == '0') {
        p++;
    } else if (p < n && s[p] >= '1' && s[p] <= '9') {
        while (p < n && is_digit(s[p]))
            p++;
    } else {
        return false;
    }
    if (p < n && s[p] == '.') {
        p++;
        if (p >= n || !is_digit(s[p]))
            return false;
        while (p < n && is_digit(s[p]))
            p++;
    }
    if (p < n && (s[p] == 'e' || s[p] == 'E')) {
        p++;
        if (p < n && (s[p] == '+' || s[p] == '-'))
            p++;
        if (p >= n || !is_digit(s[p]))
            return false;
        while (p < n && is_digit(s[p]))
            p++;
    }
done:
    *ret = kp_strndup(s + start, p - start);
    assert_non_null(*ret);
    *ret_len = p - start;
    *i = p;
    return true;
}

/* True when s[0..n) is exactly one flat JSON object followed by "\n". */
static bool json_parse_line(const char *s, size_t n, struct jobj *o)
{
    size_t i = 0, len;

    o->n = 0;
    if (n < 3 || s[0] != '{' || s[n - 1] != '\n' || s[n - 2] != '}')
        return false;
    n--; /* the newline */
    i = 1;
    if (s[i] == '}')
        return i + 1 == n;
    for (;;) {
        struct jfield *f;

        if (o->n == J_MAX_FIELDS)
            goto fail;
        f = &o->f[o->n];
        if (!parse_string(s, n, &i, &f->key, &len))
            goto fail;
        if (i >= n || s[i] != ':') {
            kp_free(f->key);
            goto fail;
        }
        i++;
        if (i < n && s[i] == '"') {
            f->is_str = true;
            if (!parse_string(s, n, &i, &f->val, &f->len)) {
                kp_free(f->key);
                goto fail;
            }
        } else {
            f->is_str = false;
            if (!parse_scalar(s, n, &i, &f->val, &f->len)) {
                kp_free(f->key);
                goto fail;
            }
        }
        o->n++;
        if (i < n && s[i] == ',') {
            i++;
            continue;
        }
        if (i < n && s[i] == '}' && i + 1 == n)
            return true;
        goto fail;
    }
fail:
    jobj_done(o);
    return false;
}

static const struct jfield *jget(const struct jobj *o, const char *key)
{
    size_t i;

    for (i = 0; i < o->n; i++)
        if (strcmp(o->f[i].key, key) == 0)
            return &o->f[i];
    return NULL;
}

static void assert_jstr(const struct jobj *o, const char *key, const char *want)
{
    const struct jfield *f = jget(o, key);

    if (!f)
        fail_msg("no field %s", key);
    assert_true(f->is_str);
    assert_string_equal(f->val, want);
}

static void assert_jraw(const struct jobj *o, const char *key, const char *want)
{
    const struct jfield *f = jget(o, key);

    if (!f)
        fail_msg("no field %s", key);
    assert_false(f->is_str);
    assert_string_equal(f->val, want);
}

/* The reader itself must refuse what is not valid JSON, or the tests below prove nothing. */
static void test_reader_rejects(void **state)
{
    static const char *const bad[] = {
        "{\"a\":1}",
        "{\"a\":1}\n\n",
        "{\"a\":\"x\ty\"}\n",
        "{\"a\":01}\n",
        "{\"a\":1.}\n",
        "{\"a\":\"\\x\"}\n",
        "{\"a\":\"\xc0\x80\"}\n",
        "{\"a\":\"\xed\xa0\x80\"}\n",
        "{\"a\":\"\\ud800\"}\n",
        "{\"a\":tru}\n",
        "{\"a\":1,}\n",
        "{\"a\" 1}\n",
        "{\"a\":\"x}\n",
        "{\"a\":\"\xf4\x90\x80\x80\"}\n",
        "{\"a\":\"\x80\"}\n",
    };
    struct jobj o;
    size_t i;

    (void)state;
    for (i = 0; i < KP_ARRAY_SIZE(bad); i++)
        if (json_parse_line(bad[i], strlen(bad[i]), &o))
            fail_msg("reader accepted bad[%zu]", i);
    {
        const char *good = "{\"a\":\"\\ud83d\\ude00\",\"b\":-1.5e+3}\n";

        assert_true(json_parse_line(good, strlen(good), &o));
    }
    assert_jstr(&o, "a", "\xf0\x9f\x98\x80");
    assert_jraw(&o, "b", "-1.5e+3");
    jobj_done(&o);
}

/* --- capture ---------------------------------------------------------------------------------- */

static int cap_fd = -1;

static int setup(void **state)
{
    (void)state;
    cap_fd = memfd_create("kp-test-log", MFD_CLOEXEC);
    if (cap_fd < 0)
        return -1;
    kp_log_set_fd(cap_fd);
    kp_log_set_level(KP_LOG_DEBUG);
    kp_log_set_format(KP_LOG_FORMAT_JSON);
    kp_log_set_redact_hook(NULL);
    kp_log_redact_clear();
    kp_log_ratelimit_reset();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    kp_log_set_fd(2);
    kp_log_set_level(KP_LOG_INFO);
    kp_log_set_format(KP_LOG_FORMAT_JSON);
    kp_log_set_redact_hook(NULL);
    kp_log_redact_clear();
    kp_log_ratelimit_reset();
    close(cap_fd);
    cap_fd = -1;
    return 0;
}

/* Everything written since the last call, as a new string. */
static char *cap_take(size_t *ret_len)
{
    off_t end = lseek(cap_fd, 0, SEEK_CUR);
    char *buf;
    ssize_t n;

    assert_true(end >= 0);
    buf = kp_malloc((size_t)end + 1);
    assert_non_null(buf);
    n = pread(cap_fd, buf, (size_t)end, 0);
    assert_int_equal(n, end);
    buf[end] = '\0';
    assert_int_equal(ftruncate(cap_fd, 0), 0);
    assert_int_equal(lseek(cap_fd, 0, SEEK_SET), 0);
    if (ret_len)
        *ret_len = (size_t)end;
    return buf;
}

static size_t count_lines(const char *s)
{
    size_t n = 0;

    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* Exactly one line was written; parses it into o and returns the raw text (caller frees). */
static char *take_one(struct jobj *o)
{
    size_t len;
    char *s = cap_take(&len);

    if (count_lines(s) != 1)
        fail_msg("expected one line, got: %s", s);
    if (!json_parse_line(s, len, o))
        fail_msg("not valid JSON: %s", s);
    return s;
}

/* --- tests ------------------------------------------------------------------------------------ */

static void test_basic_line(void **state)
{
    char want_src[64];
    struct jobj o;
    const struct jfield *ts;
    char *raw;
    int line;

    (void)state;
    line = __LINE__ + 1;
    kp_log_info("host claimed", KP_LF("host", "h7"), KP_LF("attempt", 3));
    raw = take_one(&o);
    /* Karpenter's keys, in its order: level, time, logger, message, commit; then the caller. */
    assert_int_equal(o.n, 8);
    assert_string_equal(o.f[0].key, "level");
    assert_string_equal(o.f[1].key, "time");
    assert_string_equal(o.f[2].key, "logger");
    assert_string_equal(o.f[3].key, "message");
    assert_string_equal(o.f[4].key, "commit");
    assert_string_equal(o.f[5].key, "caller");
    assert_string_equal(o.f[6].key, "host");
    assert_string_equal(o.f[7].key, "attempt");
    /* RFC 3339 in UTC with milliseconds, as zap's ISO 8601 encoder writes it. */
    ts = jget(&o, "time");
    assert_int_equal(ts->len, strlen("2006-01-02T15:04:05.000Z"));
    assert_int_equal(ts->val[4], '-');
    assert_int_equal(ts->val[10], 'T');
    assert_int_equal(ts->val[19], '.');
    assert_int_equal(ts->val[23], 'Z');
    for (int i = 20; i < 23; i++)
        assert_true(ts->val[i] >= '0' && ts->val[i] <= '9');
    assert_jstr(&o, "level", "INFO");
    assert_jstr(&o, "logger", "controller");
    assert_jstr(&o, "message", "host claimed");
    assert_jstr(&o, "commit", KP_COMMIT);
    assert_true(strlen(KP_COMMIT) > 0);
    (void)snprintf(want_src, sizeof(want_src), "test-log.c:%d", line);
    assert_jstr(&o, "caller", want_src);
    assert_null(jget(&o, "func"));
    assert_null(jget(&o, "controller")); /* no scope on this thread */
    assert_jstr(&o, "host", "h7");
    assert_jraw(&o, "attempt", "3");
    assert_null(strstr(raw, "tests/unit")); /* basename only */
    jobj_done(&o);
    kp_free(raw);

    /* No fields at all, and every level's name. */
    kp_log_debug("d");
    raw = take_one(&o);
    assert_jstr(&o, "level", "DEBUG");
    assert_int_equal(o.n, 6);
    jobj_done(&o);
    kp_free(raw);
    kp_log_warn("w");
    raw = take_one(&o);
    assert_jstr(&o, "level", "WARN");
    jobj_done(&o);
    kp_free(raw);
    kp_log_error("e");
    raw = take_one(&o);
    assert_jstr(&o, "level", "ERROR");
    jobj_done(&o);
    kp_free(raw);
}

static void test_errno_variants(void **state)
{
    struct jobj o;
    char *raw;
    int r;

    (void)state;
    r = kp_log_error_errno(-ENOENT, "open failed", KP_LF("path", "/etc/x"));
    assert_int_equal(r, -ENOENT);
    raw = take_one(&o);
    assert_string_equal(o.f[6].key, "path");
    assert_string_equal(o.f[7].key, "error");
    assert_string_equal(o.f[8].key, "errno");
    assert_jstr(&o, "error", kp_strerror(-ENOENT));
    assert_jraw(&o, "errno", "-2");
    assert_jstr(&o, "level", "ERROR");
    jobj_done(&o);
    kp_free(raw);

    r = kp_log_warn_errno(-KP_ECONFLICT, "claim lost");
    assert_int_equal(r, -KP_ECONFLICT);
    raw = take_one(&o);
    assert_jstr(&o, "level", "WARN");
    assert_jstr(&o, "error", kp_strerror(-KP_ECONFLICT));
    assert_jraw(&o, "errno", "-4098");
    jobj_done(&o);
    kp_free(raw);

    /* Errno itself is left as the caller had it. */
    errno = EXDEV;
    kp_log_info("keeps errno");
    assert_int_equal(errno, EXDEV);
    kp_free(cap_take(NULL));
}

static void test_field_types(void **state)
{
    int i = -5;
    long l = -6;
    long long ll = -7;
    unsigned u = 8;
    unsigned long ul = ULONG_MAX;
    unsigned long long ull = 9;
    int64_t i64 = INT64_MIN;
    uint64_t u64 = UINT64_MAX;
    size_t sz = 10;
    uint16_t port = 22;
    uint8_t small = 200;
    short sh = -3;
    bool b = true, nb = false;
    double d = 0.1;
    float fl = 1.5f;
    char mut[] = "m";
    char *s = mut;
    const char *cs = "c";
    const char *null_s = NULL;
    struct jobj o;
    char *raw;

    (void)state;
    assert_int_equal(KP_LF("k", i).type, KP_LOG_FIELD_I64);
    assert_int_equal(KP_LF("k", l).type, KP_LOG_FIELD_I64);
    assert_int_equal(KP_LF("k", ll).type, KP_LOG_FIELD_I64);
    assert_int_equal(KP_LF("k", i64).type, KP_LOG_FIELD_I64);
    assert_int_equal(KP_LF("k", sh).type, KP_LOG_FIELD_I64);
    assert_int_equal(KP_LF("k", u).type, KP_LOG_FIELD_U64);
    assert_int_equal(KP_LF("k", ul).type, KP_LOG_FIELD_U64);
    assert_int_equal(KP_LF("k", ull).type, KP_LOG_FIELD_U64);
    assert_int_equal(KP_LF("k", u64).type, KP_LOG_FIELD_U64);
    assert_int_equal(KP_LF("k", sz).type, KP_LOG_FIELD_U64);
    assert_int_equal(KP_LF("k", port).type, KP_LOG_FIELD_U64);
    assert_int_equal(KP_LF("k", small).type, KP_LOG_FIELD_U64);
    assert_int_equal(KP_LF("k", b).type, KP_LOG_FIELD_BOOL);
    assert_int_equal(KP_LF("k", d).type, KP_LOG_FIELD_DOUBLE);
    assert_int_equal(KP_LF("k", fl).type, KP_LOG_FIELD_DOUBLE);
    assert_int_equal(KP_LF("k", s).type, KP_LOG_FIELD_STR);
    assert_int_equal(KP_LF("k", cs).type, KP_LOG_FIELD_STR);
    assert_int_equal(KP_LF("k", "literal").type, KP_LOG_FIELD_STR);

    kp_log_info("types", KP_LF("i", i), KP_LF("l", l), KP_LF("ll", ll), KP_LF("i64", i64),
                KP_LF("sh", sh), KP_LF("u", u), KP_LF("ul", ul), KP_LF("u64", u64),
                KP_LF("port", port), KP_LF("small", small), KP_LF("b", b), KP_LF("f", nb),
                KP_LF("d", d), KP_LF("fl", fl), KP_LF("s", s), KP_LF("cs", cs),
                kp_lf_str("null_s", null_s), KP_LF("third", 1.0 / 3), KP_LF("big", 1e300),
                KP_LF("tiny", -2.5e-300), KP_LF("negzero", -0.0), KP_LF("nan", NAN),
                KP_LF("inf", INFINITY), KP_LF("ninf", -INFINITY), KP_LF("whole", 42.0));
    raw = take_one(&o);
    assert_jraw(&o, "i", "-5");
    assert_jraw(&o, "l", "-6");
    assert_jraw(&o, "ll", "-7");
    assert_jraw(&o, "i64", "-9223372036854775808");
    assert_jraw(&o, "sh", "-3");
    assert_jraw(&o, "u", "8");
    assert_jraw(&o, "ul", "18446744073709551615");
    assert_jraw(&o, "u64", "18446744073709551615");
    assert_jraw(&o, "port", "22");
    assert_jraw(&o, "small", "200");
    assert_jraw(&o, "b", "true");
    assert_jraw(&o, "f", "false");
    assert_jraw(&o, "d", "0.1");
    assert_jraw(&o, "fl", "1.5");
    assert_jstr(&o, "s", "m");
    assert_jstr(&o, "cs", "c");
    assert_jraw(&o, "null_s", "null");
    assert_true(strtod(jget(&o, "third")->val, NULL) == 1.0 / 3);
    assert_true(strtod(jget(&o, "big")->val, NULL) == 1e300);
    assert_true(strtod(jget(&o, "tiny")->val, NULL) == -2.5e-300);
    assert_jraw(&o, "negzero", "-0");
    assert_jraw(&o, "nan", "null");
    assert_jraw(&o, "inf", "null");
    assert_jraw(&o, "ninf", "null");
    assert_jraw(&o, "whole", "42");
    jobj_done(&o);
    kp_free(raw);
}

static void test_null_msg_and_key(void **state)
{
    const struct kp_log_field fields[] = {
        {.key = NULL, .type = KP_LOG_FIELD_I64, .v.i = 1},
        KP_LF("k", 2),
        KP_LF_END,
    };
    struct jobj o;
    char *raw;

    (void)state;
    assert_int_equal(kp_log_emit(KP_LOG_INFO, 0, NULL, 0, NULL, NULL, NULL, fields), 0);
    raw = take_one(&o);
    assert_jraw(&o, "message", "null");
    assert_jstr(&o, "caller", "?:0");
    assert_jraw(&o, "k", "2");
    assert_int_equal(o.n, 7);
    jobj_done(&o);
    kp_free(raw);

    /* A level past ERROR writes nothing, even when called directly. */
    assert_int_equal(kp_log_emit(KP_LOG_OFF, -EIO, "x.c", 1, "f", NULL, "m", fields), -EIO);
    raw = cap_take(NULL);
    assert_string_equal(raw, "");
    kp_free(raw);
}

static void test_escaping_control_chars(void **state)
{
    char in[64], want[16];
    struct jobj o;
    size_t n = 0;
    char *raw;
    int c;

    (void)state;
    for (c = 1; c < 0x20; c++)
        in[n++] = (char)c;
    in[n++] = 0x7f;
    in[n++] = '"';
    in[n++] = '\\';
    in[n++] = '/';
    in[n++] = 'z';
    in[n] = '\0';

    kp_log_info(in, KP_LF("v", in), KP_LF("k\"ey\n", 1));
    raw = take_one(&o);
    assert_jstr(&o, "message", in);
    assert_jstr(&o, "v", in);
    assert_jraw(&o, "k\"ey\n", "1");
    for (c = 1; c < 0x20; c++) {
        (void)snprintf(want, sizeof(want), "\\u%04x", c);
        assert_non_null(strstr(raw, want));
    }
    assert_non_null(strstr(raw, "\\u007f"));
    assert_non_null(strstr(raw, "\\\"\\\\/z"));
    for (c = 0; raw[c + 1]; c++)
        assert_true((unsigned char)raw[c] >= 0x20 && raw[c] != 0x7f);
    jobj_done(&o);
    kp_free(raw);
}

static void test_invalid_utf8(void **state)
{
    static const struct {
        const char *in, *want;
    } cases[] = {
        {"a\x80"
         "b",
         "a\xef\xbf\xbd"
         "b"},
        {"\xc0\x80", "\xef\xbf\xbd\xef\xbf\xbd"},                 /* overlong NUL */
        {"\xc1\xbf", "\xef\xbf\xbd\xef\xbf\xbd"},                 /* overlong */
        {"\xe0\x9f\xbf", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"}, /* overlong */
        {"\xed\xa0\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"}, /* surrogate */
        {"\xf0\x8f\xbf\xbf", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
        {"\xf4\x90\x80\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"}, /* > 10FFFF */
        {"\xf5\x80", "\xef\xbf\xbd\xef\xbf\xbd"},
        {"\xff", "\xef\xbf\xbd"},
        {"x\xe2\x82", "x\xef\xbf\xbd\xef\xbf\xbd"}, /* cut short at the end */
        {"\xe2\x82x", "\xef\xbf\xbd\xef\xbf\xbd"
                      "x"}, /* cut short inside */
        /* valid: 2, 3 and 4 bytes, and the extremes of each range */
        {"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"},
        {"\xc2\x80\xdf\xbf\xe0\xa0\x80\xed\x9f\xbf\xee\x80\x80\xef\xbf\xbf\xf4\x8f\xbf\xbf",
         "\xc2\x80\xdf\xbf\xe0\xa0\x80\xed\x9f\xbf\xee\x80\x80\xef\xbf\xbf\xf4\x8f\xbf\xbf"},
    };
    struct jobj o;
    size_t i;
    char *raw;

    (void)state;
    for (i = 0; i < KP_ARRAY_SIZE(cases); i++) {
        const char *want = cases[i].want;

        kp_log_info(cases[i].in, KP_LF("v", cases[i].in));
        raw = take_one(&o);
        assert_jstr(&o, "message", want);
        assert_jstr(&o, "v", want);
        jobj_done(&o);
        kp_free(raw);
    }
}

static char *repeat(const char *unit, size_t times)
{
    size_t len = strlen(unit), i;
    char *s = kp_malloc(len * times + 1);

    assert_non_null(s);
    for (i = 0; i < times; i++)
        memcpy(s + i * len, unit, len);
    s[len * times] = '\0';
    return s;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);

    return a >= b && memcmp(s + a - b, suffix, b) == 0;
}

static void test_line_cap_long_msg(void **state)
{
    char *big = repeat("a", 100000);
    struct jobj o;
    size_t len;
    char *raw;
    int r;

    (void)state;
    r = kp_log_error_errno(-EIO, big, KP_LF("host", "h7"));
    assert_int_equal(r, -EIO);
    raw = cap_take(&len);
    assert_true(len <= KP_LOG_MAX_LINE);
    assert_true(len > KP_LOG_MAX_LINE - 64); /* the room is used, not wasted */
    assert_int_equal(count_lines(raw), 1);
    assert_true(json_parse_line(raw, len, &o));
    assert_true(ends_with(jget(&o, "message")->val, "aaa..."));
    assert_jstr(&o, "commit", KP_COMMIT);
    assert_non_null(jget(&o, "caller"));
    assert_jstr(&o, "error", kp_strerror(-EIO));
    assert_jraw(&o, "errno", "-5");
    assert_jraw(&o, "truncated", "true");
    assert_null(jget(&o, "host"));
    jobj_done(&o);
    kp_free(raw);
    kp_free(big);
}

/* A long value made of multi-byte escapes and characters is cut between two of them. */
static void test_line_cap_cut_boundaries(void **state)
{
    static const char *const units[] = {
        "\x01", "\xe2\x82\xac", "\"", "\xff", "ab\x02\xf0\x9f\x98\x80",
    };
    size_t u, shift;

    (void)state;
    for (u = 0; u < KP_ARRAY_SIZE(units); u++) {
        for (shift = 0; shift < 7; shift++) {
            char *big = repeat(units[u], 20000);
            char *pad = repeat("p", shift + 1);
            struct jobj o;
            size_t len;
            char *raw;

            kp_log_warn("cut", KP_LF("pad", pad), KP_LF("big", big), KP_LF("after", 1));
            raw = cap_take(&len);
            assert_true(len <= KP_LOG_MAX_LINE);
            if (!json_parse_line(raw, len, &o))
                fail_msg("unit %zu shift %zu: not JSON", u, shift);
            assert_true(ends_with(jget(&o, "big")->val, "..."));
            assert_null(jget(&o, "after"));
            assert_jraw(&o, "truncated", "true");
            jobj_done(&o);
            kp_free(raw);
            kp_free(pad);
            kp_free(big);
        }
    }
}

/* Many fields that each fit, but not all together: the ones that do not fit are left out
 * whole, and the last kept one is intact. */
static void test_line_cap_many_fields(void **state)
{
    char *v = repeat("v", 1000);
    struct jobj o;
    size_t len, i;
    char *raw;

    (void)state;
    kp_log_info("many", KP_LF("f00", v), KP_LF("f01", v), KP_LF("f02", v), KP_LF("f03", v),
                KP_LF("f04", v), KP_LF("f05", v), KP_LF("f06", v), KP_LF("f07", v), KP_LF("f08", v),
                KP_LF("f09", v), KP_LF("f10", v), KP_LF("f11", v), KP_LF("f12", v), KP_LF("f13", v),
                KP_LF("f14", v), KP_LF("f15", v), KP_LF("f16", v), KP_LF("f17", v), KP_LF("f18", v),
                KP_LF("f19", v));
    raw = cap_take(&len);
    assert_true(len <= KP_LOG_MAX_LINE);
    assert_true(json_parse_line(raw, len, &o));
    assert_jraw(&o, "truncated", "true");
    assert_non_null(jget(&o, "f14"));
    assert_null(jget(&o, "f19"));
    /* Every kept field before the cut one (then "truncated") is whole. */
    for (i = 6; i + 2 < o.n; i++)
        assert_int_equal(o.f[i].len, 1000);
    assert_true(ends_with(o.f[o.n - 2].val, "..."));
    jobj_done(&o);
    kp_free(raw);

    /* A line that fits exactly is not marked truncated. */
    kp_log_info("fits", KP_LF("a", v), KP_LF("b", v));
    raw = take_one(&o);
    assert_null(jget(&o, "truncated"));
    jobj_done(&o);
    kp_free(raw);
    kp_free(v);
}

static void test_text_format(void **state)
{
    char want[256];
    char *raw;

    (void)state;
    kp_log_set_format(KP_LOG_FORMAT_TEXT);
    kp_log_warn("disk low", KP_LF("host", "h7"), KP_LF("n", 3), KP_LF("note", "a b"),
                KP_LF("empty", ""), KP_LF("eq", "a=b"), KP_LF("q", "say \"hi\""),
                kp_lf_bool("ok", true), KP_LF("utf", "\xc3\xa9t\xc3\xa9"), kp_lf_str("nul", NULL));
    raw = cap_take(NULL);
    assert_string_equal(raw, "warn: disk low host=h7 n=3 note=\"a b\" empty=\"\" eq=\"a=b\" "
                             "q=\"say \\\"hi\\\"\" ok=true utf=\xc3\xa9t\xc3\xa9 nul=null\n");
    kp_free(raw);

    (void)kp_log_error_errno(-ENOENT, "open failed", KP_LF("path", "/x"));
    raw = cap_take(NULL);
    (void)snprintf(want, sizeof(want), "error: open failed path=/x error=\"%s\"\n",
                   kp_strerror(-ENOENT));
    assert_string_equal(raw, want);
    kp_free(raw);

    /* msg is not quoted, but a newline in it cannot start a fake line. */
    kp_log_info("two\nlines \"q\"", KP_LF("v", "x\ny"));
    raw = cap_take(NULL);
    assert_string_equal(raw, "info: two\\u000alines \"q\" v=\"x\\u000ay\"\n");
    kp_free(raw);

    /* Cut lines stay one line. */
    {
        char *big = repeat("b", 50000);
        size_t len;

        kp_log_info(big);
        kp_free(big);
        raw = cap_take(&len);
        assert_true(len <= KP_LOG_MAX_LINE);
        assert_int_equal(count_lines(raw), 1);
        assert_true(ends_with(raw, "bbb... truncated=true\n"));
        kp_free(raw);
    }
}

static int ncalls;

static int counted(void)
{
    return ++ncalls;
}

static const char *counted_msg(void)
{
    ncalls++;
    return "counted";
}

static void test_level_filtering(void **state)
{
    enum kp_log_level lvl = KP_LOG_INFO;
    char *raw;
    int r;

    (void)state;
    ncalls = 0;
    kp_log_set_level(KP_LOG_WARN);
    assert_int_equal(kp_log_get_level(), KP_LOG_WARN);
    kp_log_debug(counted_msg(), KP_LF("n", counted()));
    kp_log_info(counted_msg(), KP_LF("n", counted()));
    assert_int_equal(ncalls, 0);
    raw = cap_take(NULL);
    assert_string_equal(raw, "");
    kp_free(raw);

    kp_log_warn(counted_msg(), KP_LF("n", counted()));
    assert_int_equal(ncalls, 2);
    raw = cap_take(NULL);
    assert_int_equal(count_lines(raw), 1);
    kp_free(raw);

    kp_log_set_level(KP_LOG_ERROR);
    r = kp_log_warn_errno(-EIO, counted_msg(), KP_LF("n", counted()));
    assert_int_equal(r, -EIO);
    kp_log_warn_rl("key", counted_msg(), KP_LF("n", counted()));
    assert_int_equal(ncalls, 2);

    kp_log_set_level(KP_LOG_OFF);
    r = kp_log_error_errno(-EPIPE, counted_msg(), KP_LF("n", counted()));
    assert_int_equal(r, -EPIPE);
    kp_log_error(counted_msg());
    assert_int_equal(ncalls, 2);
    raw = cap_take(NULL);
    assert_string_equal(raw, "");
    kp_free(raw);

    assert_int_equal(kp_log_parse_level("debug", &lvl), 0);
    assert_int_equal(lvl, KP_LOG_DEBUG);
    assert_int_equal(kp_log_parse_level("info", &lvl), 0);
    assert_int_equal(lvl, KP_LOG_INFO);
    assert_int_equal(kp_log_parse_level("warn", &lvl), 0);
    assert_int_equal(lvl, KP_LOG_WARN);
    assert_int_equal(kp_log_parse_level("error", &lvl), 0);
    assert_int_equal(lvl, KP_LOG_ERROR);
    assert_int_equal(kp_log_parse_level("off", &lvl), 0);
    assert_int_equal(lvl, KP_LOG_OFF);
    assert_int_equal(kp_log_parse_level("verbose", &lvl), -EINVAL);
    assert_int_equal(kp_log_parse_level("", &lvl), -EINVAL);
    assert_int_equal(kp_log_parse_level("INFO", &lvl), -EINVAL);
    assert_int_equal(lvl, KP_LOG_OFF); /* untouched on failure */
}

/* Logs msg with a field v = msg and returns the decoded msg (caller frees); the raw line must
 * not contain forbidden. */
static char *log_and_get(const char *msg, const char *forbidden)
{
    struct jobj o;
    char *raw, *out;

    kp_log_info(msg, KP_LF("v", msg));
    raw = take_one(&o);
    if (forbidden && strstr(raw, forbidden))
        fail_msg("line leaks %s: %s", forbidden, raw);
    assert_string_equal(jget(&o, "message")->val, jget(&o, "v")->val);
    out = kp_strdup(jget(&o, "message")->val);
    assert_non_null(out);
    jobj_done(&o);
    kp_free(raw);
    return out;
}

static void check_redacted(const char *msg, const char *want, const char *forbidden)
{
    char *got = log_and_get(msg, forbidden), *dup;

    assert_string_equal(got, want);
    kp_free(got);
    dup = kp_log_redact_dup(msg);
    assert_non_null(dup);
    assert_string_equal(dup, want);
    kp_free(dup);
}

static void test_redaction(void **state)
{
    (void)state;
    assert_int_equal(kp_log_redact_add("hunter2-secret-value"), 0);
    check_redacted("pw=hunter2-secret-value!", "pw=[REDACTED]!", "hunter2");
    check_redacted("hunter2-secret-value", "[REDACTED]", "hunter2");
    check_redacted("a hunter2-secret-value b hunter2-secret-value c", "a [REDACTED] b [REDACTED] c",
                   "hunter2");
    /* Adjacent occurrences merge into one marker. */
    check_redacted("hunter2-secret-valuehunter2-secret-value", "[REDACTED]", "hunter2");
    /* Only whole occurrences: a prefix or a split value stays. */
    check_redacted("hunter2-secret-valu", "hunter2-secret-valu", NULL);
    check_redacted("hunter2-secret-\nvalue", "hunter2-secret-\nvalue", NULL);

    /* Too short to register: accepted and ignored. */
    assert_int_equal(kp_log_redact_add("short12"), 0);
    check_redacted("x short12 y", "x short12 y", NULL);

    /* Secrets in keys of registration order shortest first: the longer one still wins. */
    assert_int_equal(kp_log_redact_add("abcdefgh"), 0);
    assert_int_equal(kp_log_redact_add("abcdefgh12345"), 0);
    check_redacted("xx abcdefgh12345 yy abcdefgh zz", "xx [REDACTED] yy [REDACTED] zz", "abcd");
    check_redacted("xx 0abcdefgh12345 yy", "xx 0[REDACTED] yy", "abcd");

    /* Two overlapping secrets leave no byte of either. */
    assert_int_equal(kp_log_redact_add("AAAABBBB"), 0);
    assert_int_equal(kp_log_redact_add("BBBBCCCC"), 0);
    check_redacted("<AAAABBBBCCCC>", "<[REDACTED]>", "AAAA");
    check_redacted("<BBBBCCCC AAAABBBB>", "<[REDACTED] [REDACTED]>", "BBBB");

    /* Removal: the value shows again; removing something unknown is harmless. */
    kp_log_redact_remove("hunter2-secret-value");
    check_redacted("pw=hunter2-secret-value!", "pw=hunter2-secret-value!", NULL);
    kp_log_redact_remove("never-registered-value");
    kp_log_redact_remove("short12");

    /* Counted registrations. */
    assert_int_equal(kp_log_redact_add("registered-twice"), 0);
    assert_int_equal(kp_log_redact_add("registered-twice"), 0);
    kp_log_redact_remove("registered-twice");
    check_redacted("registered-twice", "[REDACTED]", "twice");
    kp_log_redact_remove("registered-twice");
    check_redacted("registered-twice", "registered-twice", NULL);

    /* Text format redacts too. */
    kp_log_set_format(KP_LOG_FORMAT_TEXT);
    {
        char *raw;

        kp_log_info("t AAAABBBB", KP_LF("v", "AAAABBBB"));
        raw = cap_take(NULL);
        assert_string_equal(raw, "info: t [REDACTED] v=[REDACTED]\n");
        kp_free(raw);
    }
    kp_log_set_format(KP_LOG_FORMAT_JSON);

    kp_log_redact_clear();
    check_redacted("AAAABBBBCCCC abcdefgh", "AAAABBBBCCCC abcdefgh", NULL);
}

static void test_redaction_many_secrets(void **state)
{
    char secret[32], text[64], want[64];
    int i;

    (void)state;
    for (i = 0; i < 100; i++) {
        (void)snprintf(secret, sizeof(secret), "many-secret-%03d", i);
        assert_int_equal(kp_log_redact_add(secret), 0);
    }
    for (i = 0; i < 100; i += 7) {
        (void)snprintf(text, sizeof(text), "<many-secret-%03d>", i);
        check_redacted(text, "<[REDACTED]>", "many");
    }
    for (i = 0; i < 100; i += 2) {
        (void)snprintf(secret, sizeof(secret), "many-secret-%03d", i);
        kp_log_redact_remove(secret);
    }
    for (i = 0; i < 10; i++) {
        (void)snprintf(text, sizeof(text), "<many-secret-%03d>", i);
        (void)snprintf(want, sizeof(want), "%s", i % 2 ? "<[REDACTED]>" : text);
        check_redacted(text, want, NULL);
    }
}

/* Replaces digits by '#' and cuts the string at the first '!'. */
static void hook_digits(char *s, size_t len)
{
    size_t i;

    for (i = 0; i < len; i++) {
        if (s[i] >= '0' && s[i] <= '9')
            s[i] = '#';
        if (s[i] == '!') {
            s[i] = '\0';
            break;
        }
    }
}

static void test_redact_hook(void **state)
{
    (void)state;
    kp_log_set_redact_hook(hook_digits);
    check_redacted("pin 1234 ok", "pin #### ok", "1234");
    check_redacted("keep!drop", "keep", "drop");
    /* The hook runs after the secrets, so it sees the marker, not the secret. */
    assert_int_equal(kp_log_redact_add("token-99999999"), 0);
    check_redacted("t=token-99999999", "t=[REDACTED]", "token");
    kp_log_set_redact_hook(NULL);
    check_redacted("pin 1234 ok", "pin 1234 ok", NULL);
}

/* Counts lines of the capture that carry "message":"probe failed" etc. */
static size_t lines_with(const char *raw, const char *needle)
{
    size_t n = 0;
    const char *p = raw;

    while ((p = strstr(p, needle))) {
        n++;
        p += strlen(needle);
    }
    return n;
}

static void test_ratelimit_burst_and_suppressed(void **state)
{
    uint64_t d0 = kp_log_dropped();
    struct jobj o;
    char *raw;
    int i, r;

    (void)state;
    for (i = 0; i < KP_LOG_RL_BURST + 3; i++)
        kp_log_warn_rl("probe-fail/h7", "probe failed", KP_LF("i", i));
    raw = cap_take(NULL);
    assert_int_equal(count_lines(raw), KP_LOG_RL_BURST);
    assert_int_equal(lines_with(raw, "\"suppressed\""), 0);
    kp_free(raw);
    assert_int_equal(kp_log_dropped() - d0, 3);

    /* Another key has its own budget; errno variants return r even when dropped. */
    for (i = 0; i < KP_LOG_RL_BURST + 1; i++) {
        r = kp_log_error_errno_rl("probe-fail/h8", -EHOSTUNREACH, "probe failed");
        assert_int_equal(r, -EHOSTUNREACH);
    }
    raw = cap_take(NULL);
    assert_int_equal(count_lines(raw), KP_LOG_RL_BURST);
    kp_free(raw);
    assert_int_equal(kp_log_dropped() - d0, 4);

    /* Non-limited lines are never counted. */
    kp_log_warn("plain");
    kp_free(cap_take(NULL));

    /* After the interval the first line reports what was dropped, the next does not. */
    kp_log_ratelimit_expire();
    kp_log_warn_rl("probe-fail/h7", "probe failed", KP_LF("i", 99));
    raw = take_one(&o);
    assert_jraw(&o, "suppressed", "3");
    assert_string_equal(o.f[o.n - 1].key, "suppressed");
    jobj_done(&o);
    kp_free(raw);
    kp_log_warn_rl("probe-fail/h7", "probe failed");
    raw = take_one(&o);
    assert_null(jget(&o, "suppressed"));
    jobj_done(&o);
    kp_free(raw);

    r = kp_log_error_errno_rl("probe-fail/h8", -EHOSTUNREACH, "probe failed");
    raw = take_one(&o);
    assert_jraw(&o, "suppressed", "1");
    assert_jraw(&o, "errno", "-113");
    assert_string_equal(o.f[o.n - 2].key, "errno");
    jobj_done(&o);
    kp_free(raw);

    /* Text format shows it too. */
    kp_log_set_format(KP_LOG_FORMAT_TEXT);
    for (i = 0; i < KP_LOG_RL_BURST + 2; i++)
        kp_log_warn_rl("text-key", "again");
    kp_log_ratelimit_expire();
    kp_log_warn_rl("text-key", "again");
    raw = cap_take(NULL);
    assert_true(ends_with(raw, "warn: again suppressed=2\n"));
    kp_free(raw);
    kp_log_set_format(KP_LOG_FORMAT_JSON);

    /* Reset forgets the drops not yet reported. */
    for (i = 0; i < KP_LOG_RL_BURST + 1; i++)
        kp_log_warn_rl("forgotten", "x");
    kp_log_ratelimit_reset();
    kp_free(cap_take(NULL));
    kp_log_warn_rl("forgotten", "x");
    raw = take_one(&o);
    assert_null(jget(&o, "suppressed"));
    jobj_done(&o);
    kp_free(raw);
}

static void test_ratelimit_eviction(void **state)
{
    char key[32];
    char *raw;
    int i, round;

    (void)state;
    /* round 0: the victim plus KP_LOG_RL_KEYS - 2 others fit, so it is still limited.
     * round 1: KP_LOG_RL_KEYS others push it (the least recently used) out. */
    for (round = 0; round < 2; round++) {
        int others = round == 0 ? KP_LOG_RL_KEYS - 2 : KP_LOG_RL_KEYS;

        kp_log_ratelimit_reset();
        for (i = 0; i < KP_LOG_RL_BURST + 1; i++)
            kp_log_warn_rl("victim", "v");
        for (i = 0; i < others; i++) {
            (void)snprintf(key, sizeof(key), "other/%d", i);
            kp_log_warn_rl(key, "o");
        }
        kp_free(cap_take(NULL));
        kp_log_warn_rl("victim", "v");
        raw = cap_take(NULL);
        assert_int_equal(count_lines(raw), round == 0 ? 0 : 1);
        kp_free(raw);
    }
}

static void test_lost_line_on_enomem(void **state)
{
    struct jobj o;
    char *raw;
    uint64_t n;

    (void)state;
    assert_int_equal(kp_log_redact_add("lost-secret-value"), 0);
    /* Fail the line buffer, the redacted copy of msg, and of the field in turn. */
    for (n = 1; n <= 3; n++) {
        kp_alloc_fail_at(n);
        kp_log_warn("has lost-secret-value", KP_LF("v", "and lost-secret-value"));
        assert_true(kp_alloc_failed());
        kp_alloc_fail_at(0);
        raw = take_one(&o);
        assert_null(strstr(raw, "lost-secret"));
        assert_jstr(&o, "level", "WARN");
        assert_jstr(&o, "message", "log line lost: out of memory");
        assert_non_null(jget(&o, "time"));
        assert_jstr(&o, "logger", "controller");
        jobj_done(&o);
        kp_free(raw);
    }
    kp_log_set_format(KP_LOG_FORMAT_TEXT);
    kp_alloc_fail_at(1);
    kp_log_error("x");
    kp_alloc_fail_at(0);
    raw = cap_take(NULL);
    assert_string_equal(raw, "error: log line lost: out of memory\n");
    kp_free(raw);

    /* A new rate-limit key that cannot be tracked is let through. */
    kp_alloc_fail_at(1);
    kp_log_warn_rl("untracked", "y");
    kp_alloc_fail_at(0);
    raw = cap_take(NULL);
    assert_string_equal(raw, "warn: y\n");
    kp_free(raw);

    /* A failed registration leaves nothing behind. */
    kp_alloc_fail_at(1);
    assert_int_equal(kp_log_redact_add("another-secret-value"), -ENOMEM);
    kp_alloc_fail_at(0);
    raw = kp_log_redact_dup("another-secret-value");
    assert_string_equal(raw, "another-secret-value");
    kp_free(raw);
    kp_alloc_fail_at(1);
    assert_null(kp_log_redact_dup("anything"));
    kp_alloc_fail_at(0);
}

/* --- concurrency: writers through a pipe, a reader, and a thread churning secrets ----------- */

#define T_WRITERS 4
#define T_LINES 150

static atomic_int churn_stop;

static void *writer_main(void *arg)
{
    char *big = repeat("w", 6000); /* lines above PIPE_BUF are not atomic on their own */
    int id = (int)(intptr_t)arg, i;

    for (i = 0; i < T_LINES; i++)
        kp_log_info("concurrent thread-secret-value", KP_LF("id", id), KP_LF("i", i),
                    KP_LF("big", big), KP_LF("churn", "churn-secret-value"));
    kp_free(big);
    return NULL;
}

static void *churn_main(void *arg)
{
    (void)arg;
    while (!atomic_load(&churn_stop)) {
        if (kp_log_redact_add("churn-secret-value") == 0)
            kp_log_redact_remove("churn-secret-value");
    }
    return NULL;
}

struct reader {
    int fd;
    char *buf;
    size_t len, cap;
};

static void *reader_main(void *arg)
{
    struct reader *rd = arg;

    for (;;) {
        ssize_t n;

        if (rd->cap - rd->len < 65536) {
            rd->cap = rd->cap * 2 + 65536;
            rd->buf = kp_realloc(rd->buf, rd->cap + 1);
            if (!rd->buf)
                abort();
        }
        n = read(rd->fd, rd->buf + rd->len, rd->cap - rd->len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        rd->len += (size_t)n;
    }
    rd->buf[rd->len] = '\0';
    return NULL;
}

static void test_threads(void **state)
{
    pthread_t w[T_WRITERS], churn, reader;
    struct reader rd = {.fd = -1, .buf = NULL, .len = 0, .cap = 0};
    int p[2], i;
    size_t lines = 0;
    char *line;

    (void)state;
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    rd.fd = p[0];
    kp_log_set_fd(p[1]);
    assert_int_equal(kp_log_redact_add("thread-secret-value"), 0);
    atomic_store(&churn_stop, 0);
    assert_int_equal(pthread_create(&reader, NULL, reader_main, &rd), 0);
    assert_int_equal(pthread_create(&churn, NULL, churn_main, NULL), 0);
    for (i = 0; i < T_WRITERS; i++)
        assert_int_equal(pthread_create(&w[i], NULL, writer_main, (void *)(intptr_t)i), 0);
    for (i = 0; i < T_WRITERS; i++)
        pthread_join(w[i], NULL);
    atomic_store(&churn_stop, 1);
    pthread_join(churn, NULL);
    kp_log_set_fd(cap_fd);
    close(p[1]);
    pthread_join(reader, NULL);
    close(p[0]);

    assert_null(strstr(rd.buf, "thread-secret"));
    line = rd.buf;
    while (*line) {
        char *nl = strchr(line, '\n');
        struct jobj o;

        assert_non_null(nl);
        if (!json_parse_line(line, (size_t)(nl - line) + 1, &o))
            fail_msg("line %zu is not JSON", lines);
        assert_jstr(&o, "message", "concurrent [REDACTED]");
        jobj_done(&o);
        lines++;
        line = nl + 1;
    }
    assert_int_equal(lines, T_WRITERS * T_LINES);
    kp_free(rd.buf);
}

/* --- torture: every allocating path, each allocation failing in turn ---------------------- */

static int torture_redact_add_remove(void)
{
    int r;

    r = kp_log_redact_add("torture-secret-a");
    if (r < 0)
        goto out;
    r = kp_log_redact_add("torture-secret-bb");
    if (r < 0)
        goto out;
    r = kp_log_redact_add("torture-secret-a"); /* a second registration of the same value */
    if (r < 0)
        goto out;
    r = kp_log_redact_add("tiny");
out:
    /* Removing what never got registered is a no-op, so one cleanup fits every path. */
    kp_log_redact_remove("torture-secret-a");
    kp_log_redact_remove("torture-secret-a");
    kp_log_redact_remove("torture-secret-bb");
    return r;
}

static int torture_redact_dup(void)
{
    char *d = NULL;
    int r;

    r = kp_log_redact_add("torture-dup-secret");
    if (r < 0)
        goto out;
    d = kp_log_redact_dup("x torture-dup-secret y");
    if (!d) {
        r = -ENOMEM;
        goto out;
    }
    if (strcmp(d, "x [REDACTED] y") != 0)
        r = -EINVAL;
out:
    kp_free(d);
    kp_log_redact_remove("torture-dup-secret");
    return r;
}

/* Logging allocates but reports nothing: the scenario checks that every failure point releases
 * what it took and never crashes. Output goes to /dev/null. */
static int torture_emit(enum kp_log_format format)
{
    int fd = open("/dev/null", O_WRONLY | O_CLOEXEC), i, r;

    if (fd < 0)
        return -errno;
    kp_log_set_fd(fd);
    kp_log_set_format(format);
    kp_log_set_level(KP_LOG_DEBUG);
    r = kp_log_redact_add("torture-emit-secret");
    if (r < 0)
        goto out;
    kp_log_info("with torture-emit-secret", KP_LF("a", "torture-emit-secret"), KP_LF("n", 1),
                KP_LF("b", "plain"));
    (void)kp_log_error_errno(-EIO, "errno torture-emit-secret", KP_LF("c", "x"));
    for (i = 0; i < KP_LOG_RL_BURST + 2; i++)
        kp_log_warn_rl("torture/key", "rl", KP_LF("i", i));
    kp_log_set_redact_hook(hook_digits);
    kp_log_info("hooked 123");
    kp_log_set_redact_hook(NULL);
out:
    kp_log_ratelimit_reset();
    kp_log_redact_remove("torture-emit-secret");
    kp_log_set_format(KP_LOG_FORMAT_JSON);
    kp_log_set_level(KP_LOG_INFO);
    kp_log_set_fd(2);
    close(fd);
    return r;
}

static int torture_emit_json(void)
{
    return torture_emit(KP_LOG_FORMAT_JSON);
}

static int torture_emit_text(void)
{
    return torture_emit(KP_LOG_FORMAT_TEXT);
}

/* A thread's scope puts controller-runtime's keys, in its order, after commit; a field of the
 * same name is left out; scope values are redacted; the scope is the calling thread's only. */
static void *log_from_other_thread(void *arg)
{
    (void)arg;
    kp_log_info("elsewhere");
    return NULL;
}

static void test_scope(void **state)
{
    static const char *const keys[] = {
        "level",     "time",       "logger",          "message",
        "commit",    "controller", "controllerGroup", "controllerKind",
        "namespace", "name",       "reconcileID",     "caller",
        "host"};
    struct kp_log_scope sc = {.controller = "sshhost",
                              .group = "karpenter.kpssh.dev",
                              .kind = "SSHHost",
                              .ns = "pool",
                              .name = "h7"};
    struct jobj o;
    pthread_t t;
    char *raw;
    size_t i;

    (void)state;
    kp_log_new_id(sc.reconcile_id);
    kp_log_scope_set(&sc);
    assert_ptr_equal(kp_log_scope_get(), &sc);
    kp_log_info("probed", KP_LF("host", "h7"), KP_LF("name", "shadowed"),
                KP_LF("controller", "shadowed"));
    raw = take_one(&o);
    assert_int_equal(o.n, KP_ARRAY_SIZE(keys));
    for (i = 0; i < KP_ARRAY_SIZE(keys); i++)
        assert_string_equal(o.f[i].key, keys[i]);
    assert_jstr(&o, "controller", "sshhost");
    assert_jstr(&o, "controllerGroup", "karpenter.kpssh.dev");
    assert_jstr(&o, "controllerKind", "SSHHost");
    assert_jstr(&o, "namespace", "pool");
    assert_jstr(&o, "name", "h7");
    assert_jstr(&o, "reconcileID", sc.reconcile_id);
    assert_null(strstr(raw, "shadowed"));
    jobj_done(&o);
    kp_free(raw);

    /* Another thread has no scope. */
    assert_int_equal(pthread_create(&t, NULL, log_from_other_thread, NULL), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    raw = take_one(&o);
    assert_null(jget(&o, "controller"));
    assert_null(jget(&o, "reconcileID"));
    jobj_done(&o);
    kp_free(raw);

    /* Members left NULL (and an empty id) leave their keys out; "" namespace is written. */
    sc.group = NULL;
    sc.kind = NULL;
    sc.ns = "";
    sc.reconcile_id[0] = '\0';
    kp_log_info("cluster-scoped", KP_LF("name", "shadowed"));
    raw = take_one(&o);
    assert_null(jget(&o, "controllerGroup"));
    assert_null(jget(&o, "controllerKind"));
    assert_null(jget(&o, "reconcileID"));
    assert_jstr(&o, "namespace", "");
    assert_jstr(&o, "name", "h7");
    jobj_done(&o);
    kp_free(raw);

    /* A secret in a scope value is redacted like any other string. */
    assert_int_equal(kp_log_redact_add("scope-secret-1"), 0);
    sc.name = "h-scope-secret-1";
    kp_log_info("m");
    raw = take_one(&o);
    assert_jstr(&o, "name", "h-[REDACTED]");
    jobj_done(&o);
    kp_free(raw);

    /* The text format writes no scope. */
    kp_log_set_format(KP_LOG_FORMAT_TEXT);
    kp_log_info("plain");
    raw = cap_take(NULL);
    assert_string_equal(raw, "info: plain\n");
    kp_free(raw);
    kp_log_set_format(KP_LOG_FORMAT_JSON);

    kp_log_scope_set(NULL);
    kp_log_info("out of scope", KP_LF("name", "kept"));
    raw = take_one(&o);
    assert_null(jget(&o, "controller"));
    assert_jstr(&o, "name", "kept");
    jobj_done(&o);
    kp_free(raw);
}

/* A scope value too long for its room is cut, and the line keeps error and errno and stays
 * within the cap even with every scope value and the message at their longest. */
static void test_scope_long_values(void **state)
{
    char *big = repeat("\x01", 5000), *huge = repeat("m", 100000);
    struct kp_log_scope sc = {.controller = big, .group = big, .kind = big, .ns = big, .name = big};
    struct jobj o;
    size_t len;
    char *raw;

    (void)state;
    kp_log_new_id(sc.reconcile_id);
    kp_log_scope_set(&sc);
    (void)kp_log_error_errno(-EIO, huge, KP_LF("host", "h7"));
    kp_log_scope_set(NULL);
    raw = cap_take(&len);
    assert_true(len <= KP_LOG_MAX_LINE);
    assert_int_equal(count_lines(raw), 1);
    assert_true(json_parse_line(raw, len, &o));
    assert_true(ends_with(jget(&o, "name")->val, "..."));
    assert_jstr(&o, "reconcileID", sc.reconcile_id);
    assert_jstr(&o, "error", kp_strerror(-EIO));
    assert_jraw(&o, "errno", "-5");
    assert_jraw(&o, "truncated", "true");
    jobj_done(&o);
    kp_free(raw);
    kp_free(big);
    kp_free(huge);
}

/* Version 4 UUIDs: 8-4-4-4-12 lower-case hex, version and variant nibbles set, all distinct. */
static void test_new_id(void **state)
{
    char ids[64][KP_LOG_ID_SIZE];

    (void)state;
    for (size_t i = 0; i < KP_ARRAY_SIZE(ids); i++) {
        const char *id = ids[i];

        kp_log_new_id(ids[i]);
        assert_int_equal(strlen(id), 36);
        for (size_t j = 0; j < 36; j++) {
            if (j == 8 || j == 13 || j == 18 || j == 23)
                assert_int_equal(id[j], '-');
            else
                assert_non_null(strchr("0123456789abcdef", id[j]));
        }
        assert_int_equal(id[14], '4');
        assert_non_null(strchr("89ab", id[19]));
        for (size_t j = 0; j < i; j++)
            assert_string_not_equal(ids[j], id);
    }
}

/* Without kp_log_set_fd, JSON goes to stdout (as upstream's) and text to stderr. */
static void test_default_fd(void **state)
{
    int saved_out = dup(STDOUT_FILENO), saved_err = dup(STDERR_FILENO);
    int out = memfd_create("kp-test-out", MFD_CLOEXEC), err = memfd_create("kp-test-err", 0);
    char buf[512];
    ssize_t n;

    (void)state;
    assert_true(saved_out >= 0 && saved_err >= 0 && out >= 0 && err >= 0);
    fflush(stdout);
    fflush(stderr);
    assert_int_equal(dup2(out, STDOUT_FILENO), STDOUT_FILENO);
    assert_int_equal(dup2(err, STDERR_FILENO), STDERR_FILENO);
    kp_log_set_fd(-1);
    kp_log_info("to stdout");
    kp_log_set_format(KP_LOG_FORMAT_TEXT);
    kp_log_info("to stderr");
    kp_log_set_format(KP_LOG_FORMAT_JSON);
    kp_log_set_fd(cap_fd);
    assert_int_equal(dup2(saved_out, STDOUT_FILENO), STDOUT_FILENO);
    assert_int_equal(dup2(saved_err, STDERR_FILENO), STDERR_FILENO);
    close(saved_out);
    close(saved_err);

    n = pread(out, buf, sizeof(buf) - 1, 0);
    assert_true(n > 0);
    buf[n] = '\0';
    assert_non_null(strstr(buf, "\"message\":\"to stdout\""));
    assert_null(strstr(buf, "to stderr"));
    n = pread(err, buf, sizeof(buf) - 1, 0);
    assert_true(n > 0);
    buf[n] = '\0';
    assert_string_equal(buf, "info: to stderr\n");
    close(out);
    close(err);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reader_rejects),
        T(test_basic_line),
        T(test_errno_variants),
        T(test_field_types),
        T(test_null_msg_and_key),
        T(test_escaping_control_chars),
        T(test_invalid_utf8),
        T(test_line_cap_long_msg),
        T(test_line_cap_cut_boundaries),
        T(test_line_cap_many_fields),
        T(test_text_format),
        T(test_level_filtering),
        T(test_redaction),
        T(test_redaction_many_secrets),
        T(test_redact_hook),
        T(test_ratelimit_burst_and_suppressed),
        T(test_ratelimit_eviction),
        T(test_lost_line_on_enomem),
        T(test_threads),
        T(test_scope),
        T(test_scope_long_values),
        cmocka_unit_test(test_new_id),
        T(test_default_fd),
    };
    const struct kp_torture_case cases[] = {
        KP_TORTURE(torture_redact_add_remove),
        KP_TORTURE(torture_redact_dup),
        KP_TORTURE(torture_emit_json),
        KP_TORTURE(torture_emit_text),
    };

    return kp_test_main("log", tests, KP_ARRAY_SIZE(tests), cases, KP_ARRAY_SIZE(cases), argc,
                        argv);
}
