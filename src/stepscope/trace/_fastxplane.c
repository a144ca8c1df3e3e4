/*
 * Fast path of the XPlane reader: walk an XSpace protobuf (wire format, no schema library) and
 * write planes, lines, events, stats and metadata into flat int64 columns. No Python object is
 * created per event; strings are (offset, length) into the input buffer.
 *
 * scan(data) -> dict
 *   planes:  pl_name (off, len pairs)
 *   lines:   ln_plane, ln_id, ln_name, ln_dname (off,len), ln_ts (timestamp_ns)
 *   events:  ev_line, ev_mid, ev_off (offset_ps), ev_dur (duration_ps)
 *   stats:   st_owner (event index, or -1-k for event-metadata entry k, or -2^40 - p for plane p's
 *            own stats), st_plane, st_mid,
 *            st_kind (1 double, 2 uint64, 3 int64, 4 str, 5 bytes, 6 ref), st_ival, st_dval,
 *            st_str (off,len for kinds 4/5)
 *   event metadata: em_plane, em_id, em_name, em_dname (off,len)
 *   stat metadata:  sm_plane, sm_id, sm_name (off,len)
 *   hostnames: hn (off,len)
 *   complete_planes, truncated (1: the data ended or broke inside a plane; the planes before it
 *   are kept, the broken one is dropped whole).
 * Field numbers: see xspace_pb.py (openxla xplane.proto).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct { char *p; size_t len, cap; } Buf;

static int buf_put(Buf *b, const void *src, size_t n) {
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n) cap *= 2;
        char *np = (char *)realloc(b->p, cap);
        if (!np) return -1;
        b->p = np; b->cap = cap;
    }
    memcpy(b->p + b->len, src, n); b->len += n;
    return 0;
}
static int put64(Buf *b, int64_t v) { return buf_put(b, &v, 8); }
static int putd(Buf *b, double v) { return buf_put(b, &v, 8); }

enum { PL_NAME, LN_PLANE, LN_ID, LN_NAME, LN_DNAME, LN_TS, EV_LINE, EV_MID, EV_OFF, EV_DUR,
       ST_OWNER, ST_PLANE, ST_MID, ST_KIND, ST_IVAL, ST_DVAL, ST_STR, EM_PLANE, EM_ID, EM_NAME, EM_DNAME,
       SM_PLANE, SM_ID, SM_NAME, HN, N_BUF };
static const char *BUF_NAMES[N_BUF] = {"pl_name", "ln_plane", "ln_id", "ln_name", "ln_dname", "ln_ts", "ev_line", "ev_mid",
    "ev_off", "ev_dur", "st_owner", "st_plane", "st_mid", "st_kind", "st_ival", "st_dval", "st_str", "em_plane", "em_id",
    "em_name", "em_dname", "sm_plane", "sm_id", "sm_name", "hn"};

typedef struct {
    Buf b[N_BUF];
    const uint8_t *base;
    int64_t n_lines, n_events, n_em;
} Out;

typedef struct { const uint8_t *p, *end; } Rd;

/* owner of a plane-level stat (device properties): PLANE_OWNER - plane index */
#define PLANE_OWNER (-(((int64_t)1) << 40))

static int rd_varint(Rd *r, uint64_t *out) {
    uint64_t v = 0; int shift = 0;
    while (r->p < r->end && shift < 70) {
        uint8_t c = *r->p++;
        v |= (uint64_t)(c & 0x7F) << shift;
        if (!(c & 0x80)) { *out = v; return 0; }
        shift += 7;
    }
    return -1;
}

/* next field: tag, and for LEN fields the sub-reader; for others the value (fixed64 as bits) */
static int rd_field(Rd *r, uint32_t *field, int *wire, uint64_t *val, Rd *sub) {
    uint64_t tag;
    if (rd_varint(r, &tag)) return -1;
    *field = (uint32_t)(tag >> 3); *wire = (int)(tag & 7);
    switch (*wire) {
    case 0: return rd_varint(r, val);
    case 1: if (r->end - r->p < 8) return -1; memcpy(val, r->p, 8); r->p += 8; return 0;
    case 5: { if (r->end - r->p < 4) return -1; uint32_t v32; memcpy(&v32, r->p, 4); r->p += 4; *val = v32; return 0; }
    case 2: {
        uint64_t n;
        if (rd_varint(r, &n) || (uint64_t)(r->end - r->p) < n) return -1;
        sub->p = r->p; sub->end = r->p + n; r->p += n; *val = n; return 0;
    }
    default: return -1;
    }
}

static int put_str(Out *o, int which, const Rd *s) {
    return put64(&o->b[which], (int64_t)(s->p - o->base)) || put64(&o->b[which], (int64_t)(s->end - s->p));
}
static int put_nostr(Out *o, int which) { return put64(&o->b[which], -1) || put64(&o->b[which], 0); }

static int parse_stat(Out *o, Rd *r, int64_t owner, int64_t plane) {
    uint32_t f; int w; uint64_t v; Rd s = {0, 0};
    int64_t mid = 0, kind = 0, ival = 0; double dval = 0; const uint8_t *sp = NULL; int64_t sl = 0;
    while (r->p < r->end) {
        if (rd_field(r, &f, &w, &v, &s)) return -1;
        switch (f) {
        case 1: mid = (int64_t)v; break;
        case 2: if (w == 1) { memcpy(&dval, &v, 8); kind = 1; } break;
        case 3: kind = 2; ival = (int64_t)v; break;
        case 4: kind = 3; ival = (int64_t)v; break;
        case 5: case 6: if (w == 2) { kind = f == 5 ? 4 : 5; sp = s.p; sl = s.end - s.p; } break;
        case 7: kind = 6; ival = (int64_t)v; break;
        default: break;
        }
    }
    if (put64(&o->b[ST_OWNER], owner) || put64(&o->b[ST_PLANE], plane) || put64(&o->b[ST_MID], mid) ||
        put64(&o->b[ST_KIND], kind) || put64(&o->b[ST_IVAL], ival) || putd(&o->b[ST_DVAL], dval)) return -1;
    if (sp) { Rd t = {sp, sp + sl}; return put_str(o, ST_STR, &t); }
    return put_nostr(o, ST_STR);
}

static int parse_event(Out *o, Rd *r, int64_t line, int64_t plane) {
    uint32_t f; int w; uint64_t v; Rd s;
    int64_t mid = 0, off = 0, dur = 0, ei = o->n_events;
    while (r->p < r->end) {
        if (rd_field(r, &f, &w, &v, &s)) return -1;
        if (f == 1) mid = (int64_t)v;
        else if (f == 2) off = (int64_t)v;
        else if (f == 3) dur = (int64_t)v;
        else if (f == 4 && w == 2) { if (parse_stat(o, &s, ei, plane)) return -1; }
    }
    if (put64(&o->b[EV_LINE], line) || put64(&o->b[EV_MID], mid) || put64(&o->b[EV_OFF], off) || put64(&o->b[EV_DUR], dur)) return -1;
    o->n_events++;
    return 0;
}

static int parse_line(Out *o, Rd *r, int64_t plane) {
    uint32_t f; int w; uint64_t v; Rd s, name = {0, 0}, dname = {0, 0};
    int64_t id = 0, ts = 0, li = o->n_lines;
    while (r->p < r->end) {
        if (rd_field(r, &f, &w, &v, &s)) return -1;
        if (f == 1) id = (int64_t)v;
        else if (f == 2 && w == 2) name = s;
        else if (f == 11 && w == 2) dname = s;
        else if (f == 3) ts = (int64_t)v;
        else if (f == 4 && w == 2) { if (parse_event(o, &s, li, plane)) return -1; }
    }
    if (put64(&o->b[LN_PLANE], plane) || put64(&o->b[LN_ID], id) || put64(&o->b[LN_TS], ts)) return -1;
    if ((name.p ? put_str(o, LN_NAME, &name) : put_nostr(o, LN_NAME)) || (dname.p ? put_str(o, LN_DNAME, &dname) : put_nostr(o, LN_DNAME))) return -1;
    o->n_lines++;
    return 0;
}

static int parse_event_metadata(Out *o, Rd *r, int64_t plane, int64_t key) {
    uint32_t f; int w; uint64_t v; Rd s, name = {0, 0}, dname = {0, 0};
    int64_t mi = o->n_em, id = key;
    while (r->p < r->end) {
        if (rd_field(r, &f, &w, &v, &s)) return -1;
        if (f == 1) id = (int64_t)v;
        else if (f == 2 && w == 2) name = s;
        else if (f == 4 && w == 2) dname = s;
        else if (f == 5 && w == 2) { if (parse_stat(o, &s, -1 - mi, plane)) return -1; }
    }
    (void)id;
    if (put64(&o->b[EM_PLANE], plane) || put64(&o->b[EM_ID], key)) return -1;
    if ((name.p ? put_str(o, EM_NAME, &name) : put_nostr(o, EM_NAME)) || (dname.p ? put_str(o, EM_DNAME, &dname) : put_nostr(o, EM_DNAME))) return -1;
    o->n_em++;
    return 0;
}

static int parse_map_entry(Out *o, Rd *r, int64_t plane, int stat_meta) {
    uint32_t f; int w; uint64_t v; Rd s, value = {0, 0};
    int64_t key = 0;
    while (r->p < r->end) {
        if (rd_field(r, &f, &w, &v, &s)) return -1;
        if (f == 1) key = (int64_t)v;
        else if (f == 2 && w == 2) value = s;
    }
    if (!stat_meta) {
        Rd vv = value;
        if (!value.p) { vv.p = vv.end = r->end; }
        return parse_event_metadata(o, &vv, plane, key);
    }
    Rd name = {0, 0};
    Rd vv = value;
    while (vv.p && vv.p < vv.end) {
        if (rd_field(&vv, &f, &w, &v, &s)) return -1;
        if (f == 2 && w == 2) name = s;
    }
    if (put64(&o->b[SM_PLANE], plane) || put64(&o->b[SM_ID], key)) return -1;
    return name.p ? put_str(o, SM_NAME, &name) : put_nostr(o, SM_NAME);
}

static int parse_plane(Out *o, Rd *r, int64_t plane) {
    uint32_t f; int w; uint64_t v; Rd s, name = {0, 0};
    while (r->p < r->end) {
        if (rd_field(r, &f, &w, &v, &s)) return -1;
        if (f == 2 && w == 2) name = s;
        else if (f == 3 && w == 2) { if (parse_line(o, &s, plane)) return -1; }
        else if ((f == 4 || f == 5) && w == 2) { if (parse_map_entry(o, &s, plane, f == 5)) return -1; }
        else if (f == 6 && w == 2) { if (parse_stat(o, &s, PLANE_OWNER - plane, plane)) return -1; }
    }
    return name.p ? put_str(o, PL_NAME, &name) : put_nostr(o, PL_NAME);
}

static PyObject *py_scan(PyObject *self, PyObject *args) {
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "y*", &view)) return NULL;
    Out o; memset(&o, 0, sizeof o);
    o.base = (const uint8_t *)view.buf;
    Rd r = {o.base, o.base + view.len};
    int64_t planes = 0; int truncated = 0;
    while (r.p < r.end) {
        uint32_t f; int w; uint64_t v; Rd s;
        if (rd_field(&r, &f, &w, &v, &s)) { truncated = 1; break; }
        if (f == 1 && w == 2) {
            size_t saved[N_BUF]; for (int i = 0; i < N_BUF; i++) saved[i] = o.b[i].len;
            int64_t sl = o.n_lines, se = o.n_events, sm = o.n_em;
            if (parse_plane(&o, &s, planes)) {
                for (int i = 0; i < N_BUF; i++) o.b[i].len = saved[i];
                o.n_lines = sl; o.n_events = se; o.n_em = sm;
                truncated = 1; break;
            }
            planes++;
        } else if (f == 4 && w == 2) {
            if (put_str(&o, HN, &s)) { truncated = 1; break; }
        }
    }
    PyObject *d = PyDict_New();
    for (int i = 0; i < N_BUF && d; i++) {
        PyObject *b = PyBytes_FromStringAndSize(o.b[i].p ? o.b[i].p : "", (Py_ssize_t)o.b[i].len);
        if (!b || PyDict_SetItemString(d, BUF_NAMES[i], b)) { Py_XDECREF(b); Py_CLEAR(d); break; }
        Py_DECREF(b);
    }
    for (int i = 0; i < N_BUF; i++) free(o.b[i].p);
    PyBuffer_Release(&view);
    if (!d) return NULL;
    PyObject *np = PyLong_FromLongLong(planes), *tr = PyBool_FromLong(truncated);
    PyDict_SetItemString(d, "complete_planes", np);
    PyDict_SetItemString(d, "truncated", tr);
    Py_XDECREF(np); Py_XDECREF(tr);
    return d;
}

static PyMethodDef METHODS[] = {
    {"scan", py_scan, METH_VARARGS, "scan(data) -> dict of flat columns of an XSpace protobuf"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef MODULE = {PyModuleDef_HEAD_INIT, "_fastxplane", NULL, -1, METHODS};

PyMODINIT_FUNC PyInit__fastxplane(void) { return PyModule_Create(&MODULE); }
