/*
 * Fast path of the Kineto reader: scan a run of Chrome-trace event objects and write the fields
 * stepscope needs straight into columns (int64 arrays; strings as Arrow-style data + offsets +
 * validity). No Python object is created per event.
 *
 * parse(buf, include_python=False) -> (n_events, consumed, status, columns)
 *   Rows with ph "M"/"C", launch flows (cat "ac2g", or "async" named "launch": the same link
 *   as the correlation id) and, unless include_python, cat "python_function" (except the
 *   "nn.Module: ..." ranges of with_modules=True) are skipped.
 *   buf: bytes-like holding event objects separated by commas/whitespace (the inside of the
 *        "traceEvents" array), possibly ending mid-event or with the closing ']'.
 *   status: 0 = ran out of input (the rest, from `consumed`, is an incomplete event),
 *           1 = reached the closing ']' (at offset `consumed`),
 *          -1 = syntax error near offset `consumed` (caller falls back to the slow path).
 * An Ascend NPU task has no "cat": its args' "Task Type" (AI_CORE, MEMCPY_ASYNC...) stands in for it.
 * Times ("ts", "dur": microseconds) become exact integer nanoseconds by decimal parsing:
 * int_part * 1000 + first three fraction digits (truncated); exponent forms go through strtod.
 * Missing integers are -1 (ts/dur: INT64_MIN for "absent"); missing strings are null.
 * columns["memory"]: the allocator events ("[memory]" rows with args), six int64 each: ts (ns),
 * then args "Device Type", "Device Id", "Bytes", "Total Allocated", "Total Reserved" (-1: absent).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

/* ---------------------------------------------------------------- growable buffers ----- */
typedef struct { char *p; size_t len, cap; } Buf;

static int buf_reserve(Buf *b, size_t extra) {
    if (b->len + extra <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + extra) cap *= 2;
    char *np = (char *)realloc(b->p, cap);
    if (!np) return -1;
    b->p = np; b->cap = cap;
    return 0;
}
static int buf_put(Buf *b, const void *src, size_t n) {
    if (buf_reserve(b, n)) return -1;
    memcpy(b->p + b->len, src, n); b->len += n;
    return 0;
}

/* string column: data, int32 offsets (n+1, Arrow `string` layout), validity bytes.
 * A call's input is at most a few blocks, far below the 2 GiB int32 offsets can address. */
typedef struct { Buf data, offs, valid; } StrCol;

static int str_init(StrCol *c) { int32_t z = 0; return buf_put(&c->offs, &z, 4); }

enum { I_PID, I_TID, I_TS, I_DUR, I_ID, I_EXT, I_EXT_OLD, I_CORR, I_DEV, I_STREAM, I_BYTES, I_IN_N, I_OUT_N, I_GROUP, I_SEQ, N_INT };
enum { S_PH, S_CAT, S_NAME, S_COLL, S_DTYPE, S_PG, S_PGDESC, S_DIMS, S_TYPES, S_PGRANKS, S_INSPLIT, S_OUTSPLIT, N_STR };
static const char *INT_NAMES[N_INT] = {"pid", "tid", "ts", "dur", "id", "external_id", "external_id_old", "correlation",
                                       "device", "stream", "bytes", "in_msg_nelems", "out_msg_nelems", "group_size",
                                       "sequence_number"};
static const char *STR_NAMES[N_STR] = {"ph", "cat", "name", "collective", "dtype", "pg_name", "pg_desc", "input_dims", "input_types",
                                       "pg_ranks", "in_split", "out_split"};

typedef struct {
    Buf ints[N_INT];
    StrCol strs[N_STR];
    int64_t ival[N_INT];
    int sset[N_STR];
    /* allocator ("[memory]") events: ts and the five args below, six int64 per event, in order */
    Buf mem;
    int64_t mval[5];
    int has_args;
    int include_python;
    int check_escapes;  /* the buffer holds a backslash: escapes are validated (else none can be wrong) */
    Py_ssize_t n, dropped;
    size_t cap;  /* rows every column has room for */
    size_t first_cap;  /* the first reservation: the rows the input likely holds */
} Cols;

/* ---------------------------------------------------------------- scanning ------------- */
typedef struct { const char *s; const char *e; } Cur;

#define WS(c) ((c) == ' ' || (c) == '\n' || (c) == '\r' || (c) == '\t')
static inline void skip_ws(Cur *c) { while (c->s < c->e && WS(*c->s)) c->s++; }

static int is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

/* 1 when every backslash in (s, q) starts a valid JSON escape (as every JSON decoder requires,
 * for keys and skipped values too, so that this reader and the portable one drop the same events) */
static int valid_escapes(const char *s, const char *q) {
    const char *p = s;
    if (q - s <= 48) {  /* keys and short values: a plain loop costs less than a call */
        while (p < q && *p != '\\') p++;
        if (p == q) return 1;
    }
    while ((p = memchr(p, '\\', (size_t)(q - p))) != NULL) {
        char c = p[1];
        if (c == 'u') {
            if (q - p < 6 || !is_hex(p[2]) || !is_hex(p[3]) || !is_hex(p[4]) || !is_hex(p[5])) return 0;
            p += 6;
        } else if (c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' || c == 'r' || c == 't') {
            p += 2;
        } else return 0;
    }
    return 1;
}

/* returns 1 ok, 0 incomplete, -1 error; on ok *out points after the closing quote */
static int scan_string(const char *s, const char *e, const char **out, int esc) {
    /* s points at the opening quote */
    const char *p = s + 1;
    /* short strings (keys, most values) end before a call to memchr would pay off */
    const char *lim = e - p > 32 ? p + 32 : e;
    for (; p < lim; p++) {
        if (*p == '"') { *out = p + 1; return 1; }
        if (*p == '\\') break;
    }
    p = s + 1;
    while (p < e) {
        const char *q = memchr(p, '"', (size_t)(e - p));
        if (!q) return 0;
        /* count preceding backslashes */
        const char *b = q; size_t nb = 0;
        while (b > s + 1 && *(b - 1) == '\\') { b--; nb++; }
        if (nb % 2 == 0) {
            if (esc && !valid_escapes(s + 1, q)) return -1;  /* esc: the buffer holds a backslash */
            *out = q + 1; return 1;
        }
        p = q + 1;
    }
    return 0;
}

static int skip_value(const char *s, const char *e, const char **out, int base, int esc);

/* 1 for the bytes skip_container must look at: quote and brackets */
static unsigned char STRUCTURAL[256];
static void init_tables(void) {
    STRUCTURAL[(unsigned char)'"'] = 1; STRUCTURAL[(unsigned char)'{'] = 1; STRUCTURAL[(unsigned char)'}'] = 1;
    STRUCTURAL[(unsigned char)'['] = 1; STRUCTURAL[(unsigned char)']'] = 1;
}

/* deeper nesting is an error (the event is dropped as damaged): trace/limits.py MAX_JSON_DEPTH,
 * counted from the event object itself (1) */
#define MAX_JSON_DEPTH 64

static int skip_container(const char *s, const char *e, const char **out, int base, int esc) {
    int depth = base;
    const char *p = s;
    while (p < e) {
        while (p < e && !STRUCTURAL[(unsigned char)*p]) p++;
        if (p >= e) break;
        char ch = *p;
        if (ch == '"') {
            const char *q; int r = scan_string(p, e, &q, esc);
            if (r <= 0) return r;
            p = q; continue;
        }
        if (ch == '{' || ch == '[') { if (++depth > MAX_JSON_DEPTH) return -1; }
        else if (ch == '}' || ch == ']') { depth--; if (depth == base) { *out = p + 1; return 1; } if (depth < base) return -1; }
        p++;
    }
    return 0;
}

#define DIGIT(c) ((c) >= '0' && (c) <= '9')
#define TERMINATOR(c) (WS(c) || (c) == ',' || (c) == '}' || (c) == ']')

/* where the JSON number -?(0|[1-9]d*)(.d+)?([eE][+-]?d+)? starting at s ends, or NULL when the
 * text from s is not one (or [s, e) ends inside it) */
static const char *number_end(const char *s, const char *e) {
    const char *p = s;
    if (p < e && *p == '-') p++;
    if (p >= e || !DIGIT(*p)) return NULL;
    if (*p == '0') p++; else while (p < e && DIGIT(*p)) p++;
    if (p < e && *p == '.') {
        p++;
        if (p >= e || !DIGIT(*p)) return NULL;
        while (p < e && DIGIT(*p)) p++;
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < e && (*p == '+' || *p == '-')) p++;
        if (p >= e || !DIGIT(*p)) return NULL;
        while (p < e && DIGIT(*p)) p++;
    }
    return p;
}

/* 1 when [s, e) is a JSON scalar: true, false, null or a number.
 * A corrupt token ("11Q0") must be a syntax error: read leniently it became the number 11. */
static int valid_scalar(const char *s, const char *e) {
    size_t n = (size_t)(e - s);
    if (*s == 't') return n == 4 && memcmp(s, "true", 4) == 0;
    if (*s == 'f') return n == 5 && memcmp(s, "false", 5) == 0;
    if (*s == 'n') return n == 4 && memcmp(s, "null", 4) == 0;
    return number_end(s, e) == e;
}

/* a number at s, in one pass: 1 with *out after it when it is a JSON number followed by a
 * terminator; otherwise skip_value's rule for any other token: 0 when no terminator comes before
 * the input ends (incomplete), else -1 (not valid JSON) */
static int scan_number(const char *s, const char *e, const char **out) {
    const char *q = number_end(s, e);
    if (q != NULL && q < e && TERMINATOR(*q)) { *out = q; return 1; }
    while (s < e && !TERMINATOR(*s)) s++;
    return s == e ? 0 : -1;
}

/* base: the depth the value sits at (1 inside the event object, 2 inside its args) */
static int skip_value(const char *s, const char *e, const char **out, int base, int esc) {
    if (s >= e) return 0;
    char ch = *s;
    if (ch == '"') return scan_string(s, e, out, esc);
    if (ch == '{' || ch == '[') return skip_container(s, e, out, base, esc);
    if (ch != 't' && ch != 'f' && ch != 'n') return scan_number(s, e, out);
    const char *p = s;
    while (p < e && !TERMINATOR(*p)) p++;
    if (p == e) return 0;
    if (p == s || !valid_scalar(s, p)) return -1;
    *out = p; return 1;
}

/* ---------------------------------------------------------------- value decoding ------- */
static int put_utf8(Buf *b, uint32_t cp) {
    char t[4]; size_t n;
    if (cp < 0x80) { t[0] = (char)cp; n = 1; }
    else if (cp < 0x800) { t[0] = (char)(0xC0 | (cp >> 6)); t[1] = (char)(0x80 | (cp & 0x3F)); n = 2; }
    else if (cp < 0x10000) { t[0] = (char)(0xE0 | (cp >> 12)); t[1] = (char)(0x80 | ((cp >> 6) & 0x3F)); t[2] = (char)(0x80 | (cp & 0x3F)); n = 3; }
    else { t[0] = (char)(0xF0 | (cp >> 18)); t[1] = (char)(0x80 | ((cp >> 12) & 0x3F)); t[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); t[3] = (char)(0x80 | (cp & 0x3F)); n = 4; }
    return buf_put(b, t, n);
}

static int hex4(const char *p, uint32_t *v) {
    uint32_t r = 0;
    for (int i = 0; i < 4; i++) {
        char ch = p[i]; r <<= 4;
        if (ch >= '0' && ch <= '9') r |= (uint32_t)(ch - '0');
        else if (ch >= 'a' && ch <= 'f') r |= (uint32_t)(ch - 'a' + 10);
        else if (ch >= 'A' && ch <= 'F') r |= (uint32_t)(ch - 'A' + 10);
        else return -1;
    }
    *v = r; return 0;
}

/* append the unescaped content of the JSON string [s, end) (quotes included) */
static int unescape_into(Buf *b, const char *s, const char *end) {
    const char *p = s + 1, *stop = end - 1;
    while (p < stop) {
        const char *bs = memchr(p, '\\', (size_t)(stop - p));
        if (!bs) return buf_put(b, p, (size_t)(stop - p));
        if (buf_put(b, p, (size_t)(bs - p))) return -1;
        p = bs + 1;
        if (p >= stop) return -1;
        char ch = *p++;
        switch (ch) {
            case '"': case '\\': case '/': if (buf_put(b, &ch, 1)) return -1; break;
            case 'b': if (buf_put(b, "\b", 1)) return -1; break;
            case 'f': if (buf_put(b, "\f", 1)) return -1; break;
            case 'n': if (buf_put(b, "\n", 1)) return -1; break;
            case 'r': if (buf_put(b, "\r", 1)) return -1; break;
            case 't': if (buf_put(b, "\t", 1)) return -1; break;
            case 'u': {
                uint32_t cp;
                if (stop - p < 4 || hex4(p, &cp)) return -1;
                p += 4;
                if (cp >= 0xD800 && cp <= 0xDBFF && stop - p >= 6 && p[0] == '\\' && p[1] == 'u') {
                    uint32_t lo;
                    if (!hex4(p + 2, &lo) && lo >= 0xDC00 && lo <= 0xDFFF) { cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00); p += 6; }
                    else cp = 0xFFFD;
                } else if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD;
                if (put_utf8(b, cp)) return -1;
                break;
            }
            default: return -1;
        }
    }
    return 0;
}

/* store a string value (or the raw text of any other value when raw=1) */
static int set_str(Cols *c, int k, const char *s, const char *end, int raw) {
    StrCol *col = &c->strs[k];
    if (c->sset[k]) { /* duplicate key: keep the first */
        return 0;
    }
    if (!raw && *s == '"' && !c->check_escapes) { if (buf_put(&col->data, s + 1, (size_t)(end - s - 2))) return -1; }
    else if (!raw && *s == '"') { if (unescape_into(&col->data, s, end)) return -1; }
    else if (!raw && (end - s == 4) && memcmp(s, "null", 4) == 0) { return 0; }
    else if (!raw) { if (buf_put(&col->data, s, (size_t)(end - s))) return -1; } /* number/bool as text */
    else { if (buf_put(&col->data, s, (size_t)(end - s))) return -1; }
    c->sset[k] = 1;
    return 0;
}

/* exact microseconds-text -> ns */
static int parse_us_ns(const char *s, const char *end, int64_t *out) {
    if (end - s >= 2 && *s == '"' && *(end - 1) == '"') { s++; end--; }
    const char *p = s; int neg = 0;
    if (p < end && *p == '-') { neg = 1; p++; }
    if (p >= end || *p < '0' || *p > '9') return -1;
    int64_t ip = 0; int nd = 0;
    while (p < end && *p >= '0' && *p <= '9') { if (++nd > 18) goto slow; ip = ip * 10 + (*p - '0'); p++; }
    if (ip > INT64_MAX / 1000 - 1) goto slow;
    int64_t frac = 0; int fd = 0;
    if (p < end && *p == '.') {
        p++;
        while (p < end && *p >= '0' && *p <= '9') { if (fd < 3) { frac = frac * 10 + (*p - '0'); fd++; } p++; }
        while (fd < 3) { frac *= 10; fd++; }
    } else frac = 0;
    if (p != end) goto slow;
    *out = neg ? -(ip * 1000 + frac) : ip * 1000 + frac;
    return 0;
slow: {
        /* only a JSON number (exponent forms): strtod alone would also take "0x10", "inf", " 12" */
        char tmp[64]; size_t n = (size_t)(end - s);
        if (n == 0 || n >= sizeof tmp || !valid_scalar(s, end) || *s == 't' || *s == 'f' || *s == 'n') return -1;
        memcpy(tmp, s, n); tmp[n] = 0;
        char *ep; double d = strtod(tmp, &ep);
        if (ep != tmp + n || !isfinite(d) || fabs(d) > 9.2e15) return -1; /* d * 1000 must fit int64 */
        *out = (int64_t)llround(d * 1000.0);
        return 0;
    }
}

/* integer from a number or a string ("0x0", "2560", "stream 7"); -1 when unusable */
static int64_t parse_int_value(const char *s, const char *end) {
    char tmp[64];
    if (*s == '"') {
        s++; end--;
        size_t n = (size_t)(end - s);
        if (n == 0 || n >= sizeof tmp) return -1;
        memcpy(tmp, s, n); tmp[n] = 0;
        char *ep; long long v = strtoll(tmp, &ep, 0);
        if (*ep == 0 && ep != tmp) return (int64_t)v;
        /* all the digits in the string, as _id_of does in the slow path */
        int64_t r = 0; int nd = 0;
        for (size_t i = 0; i < n; i++) if (tmp[i] >= '0' && tmp[i] <= '9') { if (++nd > 17) return -1; r = r * 10 + (tmp[i] - '0'); }
        return nd ? r : -1;
    }
    size_t n = (size_t)(end - s);
    if (n == 0 || n >= sizeof tmp) return -1;
    const char *p = s; int neg = 0; uint64_t r = 0; int nd = 0;
    if (*p == '-') { neg = 1; p++; }
    while (p < end && *p >= '0' && *p <= '9') { if (++nd > 19) break; r = r * 10 + (uint64_t)(*p - '0'); p++; }
    if (p == end && nd && r <= (uint64_t)INT64_MAX) return neg ? -(int64_t)r : (int64_t)r;
    memcpy(tmp, s, n); tmp[n] = 0;
    char *ep; double d = strtod(tmp, &ep);
    if (ep == tmp || !isfinite(d) || fabs(d) > 9.2e18) return -1;
    return (int64_t)d;
}

/* an allocator figure as Python's JSON would give it: an integer in int64, or a number with a
 * fraction or exponent whose value is a whole number below 9.2e18; -1 otherwise (strings,
 * booleans, null, fractions, out of range) */
static int64_t parse_json_int(const char *s, const char *end) {
    char ch = *s;
    if (ch == '"' || ch == 't' || ch == 'f' || ch == 'n' || ch == '{' || ch == '[') return -1;
    const char *p = s; int neg = 0; uint64_t r = 0; int nd = 0;
    if (*p == '-') { neg = 1; p++; }
    while (p < end && DIGIT(*p)) { if (++nd > 19) break; r = r * 10 + (uint64_t)(*p - '0'); p++; }
    if (p == end && nd) {
        if (!neg) return r <= (uint64_t)INT64_MAX ? (int64_t)r : -1;
        if (r <= (uint64_t)INT64_MAX) return -(int64_t)r;
        return r == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -1;
    }
    char tmp[64]; size_t n = (size_t)(end - s);
    if (n >= sizeof tmp) return -1;
    memcpy(tmp, s, n); tmp[n] = 0;
    char *ep; double d = strtod(tmp, &ep);
    if (ep != tmp + n || !isfinite(d) || d != floor(d) || fabs(d) >= 9.2e18) return -1;
    return (int64_t)d;
}

static const char *MEM_KEYS[5] = {"Device Type", "Device Id", "Bytes", "Total Allocated", "Total Reserved"};

/* members of an object: strictly "key": value, comma-separated, no trailing comma (as every JSON
 * decoder requires, so that this reader and the portable one drop the same damaged events) */
enum { SEP_FIRST, SEP_VALUE, SEP_COMMA };

#define KEY(lit) (klen == sizeof(lit) - 1 && memcmp(k, lit, sizeof(lit) - 1) == 0)

/* parse the args object; c->s at '{' */
static int parse_args(Cur *cur, Cols *c) {
    const char *p = cur->s + 1, *e = cur->e;
    int sep = SEP_FIRST;
    for (;;) {
        while (p < e && WS(*p)) p++;
        if (p >= e) return 0;
        if (*p == '}') { if (sep == SEP_COMMA) return -1; cur->s = p + 1; return 1; }
        if (*p == ',') { if (sep != SEP_VALUE) return -1; sep = SEP_COMMA; p++; continue; }
        if (*p != '"' || sep == SEP_VALUE) return -1;
        sep = SEP_VALUE;
        const char *kend; int r = scan_string(p, e, &kend, c->check_escapes);
        if (r <= 0) return r;
        const char *k = p + 1; size_t klen = (size_t)(kend - 1 - k);
        p = kend;
        while (p < e && WS(*p)) p++;
        if (p >= e) return 0;
        if (*p != ':') return -1;
        p++;
        while (p < e && WS(*p)) p++;
        const char *vend; r = skip_value(p, e, &vend, 2, c->check_escapes);
        if (r <= 0) return r;
        int ik = -1, sk = -1, raw = 0;
        if (KEY("External id")) ik = I_EXT;
        else if (KEY("external id")) ik = I_EXT_OLD;
        else if (KEY("correlation")) ik = I_CORR;
        else if (KEY("device")) ik = I_DEV;
        else if (KEY("stream")) ik = I_STREAM;
        else if (KEY("bytes")) ik = I_BYTES;
        else if (KEY("In msg nelems")) ik = I_IN_N;
        else if (KEY("Out msg nelems")) ik = I_OUT_N;
        else if (KEY("Group size")) ik = I_GROUP;
        else if (KEY("Sequence number")) ik = I_SEQ;
        else if (KEY("Collective name")) sk = S_COLL;
        else if (KEY("dtype")) sk = S_DTYPE;
        else if (KEY("Process Group Name")) sk = S_PG;
        else if (KEY("Process Group Description")) sk = S_PGDESC;
        else if (KEY("Process Group Ranks")) sk = S_PGRANKS;
        else if (KEY("In split size")) sk = S_INSPLIT;
        else if (KEY("Out split size")) sk = S_OUTSPLIT;
        else if (KEY("Task Type")) sk = S_CAT; /* Ascend NPU tasks: no "cat"; their task type stands in */
        else if (KEY("Input Dims")) { sk = S_DIMS; raw = 1; }
        else if (KEY("Input type")) { sk = S_TYPES; raw = 1; }
        if (ik < 0 && sk < 0 && klen >= 5 && (k[0] == 'D' || k[0] == 'B' || k[0] == 'T')) {
            for (int m = 0; m < 5; m++)
                if (klen == strlen(MEM_KEYS[m]) && memcmp(k, MEM_KEYS[m], klen) == 0) { c->mval[m] = parse_json_int(p, vend); break; }
        }
        if (ik >= 0) c->ival[ik] = parse_int_value(p, vend);
        else if (sk >= 0 && set_str(c, sk, p, vend, raw)) return -1;
        p = vend;
    }
}

/* one event object; cur->s at '{' */
static int parse_event(Cur *cur, Cols *c) {
    const char *p = cur->s + 1, *e = cur->e;
    for (int i = 0; i < N_INT; i++) c->ival[i] = -1;
    c->ival[I_TS] = INT64_MIN; c->ival[I_DUR] = INT64_MIN;
    for (int i = 0; i < N_STR; i++) c->sset[i] = 0;
    for (int i = 0; i < 5; i++) c->mval[i] = -1;
    c->has_args = 0;
    /* remember string-column lengths to roll back an incomplete event */
    size_t mark[N_STR];
    for (int i = 0; i < N_STR; i++) mark[i] = c->strs[i].data.len;
    int r;
    int sep = SEP_FIRST;
    for (;;) {
        while (p < e && WS(*p)) p++;
        if (p >= e) { r = 0; goto fail; }
        if (*p == '}') { if (sep == SEP_COMMA) { r = -1; goto fail; } p++; break; }
        if (*p == ',') { if (sep != SEP_VALUE) { r = -1; goto fail; } sep = SEP_COMMA; p++; continue; }
        if (*p != '"' || sep == SEP_VALUE) { r = -1; goto fail; }
        sep = SEP_VALUE;
        const char *kend; r = scan_string(p, e, &kend, c->check_escapes);
        if (r <= 0) goto fail;
        const char *k = p + 1; size_t klen = (size_t)(kend - 1 - k);
        p = kend;
        while (p < e && WS(*p)) p++;
        if (p >= e) { r = 0; goto fail; }
        if (*p != ':') { r = -1; goto fail; }
        p++;
        while (p < e && WS(*p)) p++;
        if (p >= e) { r = 0; goto fail; }
        if (KEY("args") && *p == '{') {
            Cur sub = {p, e};
            r = parse_args(&sub, c);
            if (r <= 0) goto fail;
            c->has_args = 1;
            p = sub.s;
            continue;
        }
        const char *vend; r = skip_value(p, e, &vend, 1, c->check_escapes);
        if (r <= 0) goto fail;
        if (KEY("ts")) { int64_t v; if (parse_us_ns(p, vend, &v) == 0) c->ival[I_TS] = v; }
        else if (KEY("dur")) { int64_t v; if (parse_us_ns(p, vend, &v) == 0) c->ival[I_DUR] = v; }
        else if (KEY("pid")) c->ival[I_PID] = parse_int_value(p, vend);
        else if (KEY("tid")) c->ival[I_TID] = parse_int_value(p, vend);
        else if (KEY("id")) c->ival[I_ID] = parse_int_value(p, vend);
        else if (KEY("ph")) { if (set_str(c, S_PH, p, vend, 0)) { r = -1; goto fail; } }
        else if (KEY("cat")) { if (set_str(c, S_CAT, p, vend, 0)) { r = -1; goto fail; } }
        else if (KEY("name")) { if (set_str(c, S_NAME, p, vend, 0)) { r = -1; goto fail; } }
        p = vend;
    }
    cur->s = p;
    /* metadata/counter rows, and python_function rows unless asked for, are not kept */
    {
        StrCol *ph = &c->strs[S_PH], *cat = &c->strs[S_CAT];
        size_t phn = ph->data.len - mark[S_PH], catn = cat->data.len - mark[S_CAT];
        const char *phs = ph->data.p + mark[S_PH], *cats = cat->data.p + mark[S_CAT];
        int drop = c->sset[S_PH] && phn == 1 && (phs[0] == 'M' || phs[0] == 'C');
        if (!c->include_python && c->sset[S_CAT] && catn == 15 && memcmp(cats, "python_function", 15) == 0) {
            /* nn.Module ranges (with_modules=True) are kept: they are the module hierarchy */
            StrCol *nm0 = &c->strs[S_NAME];
            size_t n0 = nm0->data.len - mark[S_NAME];
            if (!(c->sset[S_NAME] && n0 > 11 && memcmp(nm0->data.p + mark[S_NAME], "nn.Module: ", 11) == 0)) drop = 1;
        }
        /* launch flows (CPU launch -> kernel) repeat the correlation id both rows carry */
        if (c->sset[S_PH] && phn == 1 && (phs[0] == 's' || phs[0] == 'f' || phs[0] == 't') && c->sset[S_CAT]) {
            StrCol *nm = &c->strs[S_NAME];
            size_t nmn = nm->data.len - mark[S_NAME];
            const char *nms = nm->data.p + mark[S_NAME];
            if ((catn == 4 && memcmp(cats, "ac2g", 4) == 0) ||
                (catn == 5 && memcmp(cats, "async", 5) == 0 && c->sset[S_NAME] && nmn == 6 && memcmp(nms, "launch", 6) == 0))
                drop = 1;
        }
        if (drop) {
            for (int i = 0; i < N_STR; i++) c->strs[i].data.len = mark[i];
            c->dropped++;
            return 1;
        }
    }
    /* commit the row: grow every column at once, then plain stores */
    if ((size_t)c->n >= c->cap) {
        size_t cap = c->cap ? c->cap * 2 : c->first_cap;
        for (int i = 0; i < N_INT; i++) if (buf_reserve(&c->ints[i], (cap - c->n) * 8)) return -2;
        for (int i = 0; i < N_STR; i++)
            if (buf_reserve(&c->strs[i].offs, (cap - c->n) * 4) || buf_reserve(&c->strs[i].valid, cap - c->n)) return -2;
        c->cap = cap;
    }
    for (int i = 0; i < N_INT; i++) { memcpy(c->ints[i].p + c->ints[i].len, &c->ival[i], 8); c->ints[i].len += 8; }
    for (int i = 0; i < N_STR; i++) {
        StrCol *col = &c->strs[i];
        int32_t o = (int32_t)col->data.len;
        memcpy(col->offs.p + col->offs.len, &o, 4); col->offs.len += 4;
        col->valid.p[col->valid.len++] = (char)c->sset[i];
    }
    c->n++;
    {
        StrCol *nm = &c->strs[S_NAME];
        if (c->has_args && c->sset[S_NAME] && nm->data.len - mark[S_NAME] == 8 && memcmp(nm->data.p + mark[S_NAME], "[memory]", 8) == 0) {
            int64_t row[6] = {c->ival[I_TS], c->mval[0], c->mval[1], c->mval[2], c->mval[3], c->mval[4]};
            if (buf_put(&c->mem, row, sizeof row)) return -2;
        }
    }
    return 1;
fail:
    for (int i = 0; i < N_STR; i++) c->strs[i].data.len = mark[i];
    return r;
}

static void cols_free(Cols *c) {
    free(c->mem.p);
    for (int i = 0; i < N_INT; i++) free(c->ints[i].p);
    for (int i = 0; i < N_STR; i++) { free(c->strs[i].data.p); free(c->strs[i].offs.p); free(c->strs[i].valid.p); }
}

/* A column handed to Python without a copy: it owns the scanner's buffer and exposes it through
 * the buffer protocol (read-only), for numpy.frombuffer and pyarrow.py_buffer. */
typedef struct { PyObject_HEAD char *p; Py_ssize_t len; } Owned;

static void owned_dealloc(PyObject *self) { free(((Owned *)self)->p); Py_TYPE(self)->tp_free(self); }

static int owned_getbuffer(PyObject *self, Py_buffer *view, int flags) {
    static char empty[1];
    Owned *o = (Owned *)self;
    return PyBuffer_FillInfo(view, self, o->p ? o->p : empty, o->len, 1, flags);
}

static PyBufferProcs OWNED_BUFFER = {owned_getbuffer, NULL};

static PyTypeObject OwnedType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "stepscope.trace._fastkineto.Column",
    .tp_basicsize = sizeof(Owned),
    .tp_dealloc = owned_dealloc,
    .tp_as_buffer = &OWNED_BUFFER,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "a scanner column's bytes (buffer protocol, read-only)",
};

/* the buffer moves into a new Owned (shrunk to its length); b is left empty */
static PyObject *as_bytes(Buf *b) {
    Owned *o = PyObject_New(Owned, &OwnedType);
    if (!o) return NULL;
    o->p = b->p; o->len = (Py_ssize_t)b->len;
    if (o->p && b->cap > b->len + 4096) {
        char *np = (char *)realloc(o->p, b->len ? b->len : 1);
        if (np) o->p = np;
    }
    b->p = NULL; b->len = b->cap = 0;
    return (PyObject *)o;
}

static PyObject *py_parse(PyObject *self, PyObject *args) {
    Py_buffer view;
    int include_python = 0;
    if (!PyArg_ParseTuple(args, "y*|p", &view, &include_python)) return NULL;
    Cols c; memset(&c, 0, sizeof c);
    c.include_python = include_python;
    c.check_escapes = view.len > 0 && memchr(view.buf, '\\', (size_t)view.len) != NULL;
    /* a Kineto event takes 150-400 bytes of text: one reservation for most inputs, few copies */
    c.first_cap = (size_t)view.len / 256 > 1024 ? (size_t)view.len / 256 : 1024;
    int status = 0; const char *consumed;
    Cur cur = {(const char *)view.buf, (const char *)view.buf + view.len};
    int oom = 0;
    Py_BEGIN_ALLOW_THREADS
    for (int i = 0; i < N_STR; i++) if (str_init(&c.strs[i])) oom = 1;
    consumed = cur.s;
    while (!oom) {
        while (cur.s < cur.e && (WS(*cur.s) || *cur.s == ',')) cur.s++;
        consumed = cur.s;
        if (cur.s >= cur.e) { status = 0; break; }
        if (*cur.s == ']') { status = 1; break; }
        if (*cur.s != '{') { status = -1; break; }
        int r = parse_event(&cur, &c);
        if (r == 1) { consumed = cur.s; continue; }
        if (r == 0) { status = 0; break; }
        if (r == -2) { oom = 1; break; }
        status = -1; break;
    }
    Py_END_ALLOW_THREADS
    Py_ssize_t off = (Py_ssize_t)(consumed - (const char *)view.buf);
    PyBuffer_Release(&view);
    if (oom) { cols_free(&c); return PyErr_NoMemory(); }
    PyObject *d = PyDict_New();
    if (!d) { cols_free(&c); return NULL; }
    for (int i = 0; i < N_INT; i++) {
        PyObject *v = as_bytes(&c.ints[i]);
        if (!v || PyDict_SetItemString(d, INT_NAMES[i], v)) { Py_XDECREF(v); Py_DECREF(d); cols_free(&c); return NULL; }
        Py_DECREF(v);
    }
    for (int i = 0; i < N_STR; i++) {
        PyObject *t = Py_BuildValue("(NNN)", as_bytes(&c.strs[i].data), as_bytes(&c.strs[i].offs), as_bytes(&c.strs[i].valid));
        if (!t || PyDict_SetItemString(d, STR_NAMES[i], t)) { Py_XDECREF(t); Py_DECREF(d); cols_free(&c); return NULL; }
        Py_DECREF(t);
    }
    {
        PyObject *v = as_bytes(&c.mem);
        if (!v || PyDict_SetItemString(d, "memory", v)) { Py_XDECREF(v); Py_DECREF(d); cols_free(&c); return NULL; }
        Py_DECREF(v);
    }
    Py_ssize_t n = c.n;
    cols_free(&c);
    return Py_BuildValue("(nniN)", n, off, status, d);
}

static PyMethodDef METHODS[] = {
    {"parse", py_parse, METH_VARARGS, "parse(buf, include_python=False) -> (n_events, consumed, status, columns)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef MODULE = {PyModuleDef_HEAD_INIT, "_fastkineto", "Fast Kineto event scanner", -1, METHODS};

PyMODINIT_FUNC PyInit__fastkineto(void) {
    init_tables();
    if (PyType_Ready(&OwnedType) < 0) return NULL;
    return PyModule_Create(&MODULE);
}
