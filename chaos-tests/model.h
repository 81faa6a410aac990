/*
 * model.h: what the chaos run knows must be true. For every key it records
 * the outcome of every acknowledged write and delete, and for a call that
 * failed or timed out ("uncertain": it may or may not have applied, possibly
 * later, when a stopped node resumes) both outcomes.
 *
 * Items are {"Id":{"S":"k<idx>"},"ver":{"N":...},"pay":...,"ExpirationTime":...}.
 * Every write sets a fresh "ver", so the checker tells which write it sees;
 * other attributes are not compared (an update racing a TTL delete re-creates
 * the item with only its key and the updated attributes: UpdateItem upserts).
 *
 * Thread-safety: none. Each key has one writer (see run.h); tables are added
 * by the main thread before any thread uses them.
 *
 * Invariants:
 *  1. A key's candidates are the states it may be in after its last call:
 *     one after an acknowledged put, delete or TTL-setting update; two or
 *     more after an uncertain call or an update that raced a TTL delete.
 *  2. After an uncertain call a key is frozen: nothing writes it again, so a
 *     late-applied request cannot reorder with a later one.
 *  3. The TTL rules are docs/ttl.md's; values the workload writes stay far
 *     from the five-year guard and the strictly-before boundary, except
 *     where the checker allows both outcomes.
 */
#ifndef LAPSE_CHAOS_MODEL_H
#define LAPSE_CHAOS_MODEL_H

#include <stddef.h>
#include <stdint.h>

#define MODEL_TTL_ATTR "ExpirationTime"
#define MODEL_GUARD_S 157788000LL /* 5 years of 365.25 days (docs/ttl.md) */
#define MODEL_CANDS 16
#define MODEL_FREEZE_AT 4 /* candidates at which a key stops being written */
#define MODEL_MAX_TABLES 64
#define MODEL_MAX_CREATED 64

typedef enum ttl_kind {
    TK_NONE = 0, /* no TTL attribute */
    TK_NUM = 1,  /* a top-level N within range: expires unless too old */
    TK_OTHER = 2 /* a string, another type, or out of range: never expires */
} ttl_kind;

/* TTL classes the workload draws from (model_gen_ttl). */
typedef enum ttl_class {
    TC_PAST,       /* seconds to minutes ago: gone by the settle instant */
    TC_DURING,     /* due during the rest of the run, maybe with a fraction */
    TC_SOON,       /* due within 0-2 s */
    TC_FUTURE,     /* a day to a year ahead */
    TC_TOO_OLD,    /* more than five years ago, zero or negative: never */
    TC_OLD_OK,     /* one to four years ago: eligible and due */
    TC_STRING,     /* {"S":...}: never */
    TC_OTHER_TYPE, /* BOOL, or N inside a list: never */
    TC_MILLIS,     /* milliseconds read as seconds: eligible, far future */
    TC_HUGE,       /* out of range for epoch seconds: never */
    TC_NONE,       /* no attribute */
    TC_NOW,        /* due this very second or the last: racing the scanner */
    TC_COUNT
} ttl_class;

typedef struct mstate {
    uint8_t present;
    uint8_t kind;     /* ttl_kind */
    uint8_t extended; /* an update extended or removed a TTL that was due or nearly so */
    int64_t ttl_s;    /* TK_NUM: the value truncated toward zero */
    uint64_t ver;     /* the "ver" attribute */
} mstate;

/* One call on a key, in the order they were made (the stream check,
 * check_stream.c, finds each one's record). */
typedef struct mwrite {
    uint64_t ver;   /* the "ver" it wrote (a delete writes none: 0) */
    uint8_t del;    /* a delete */
    uint8_t acked;  /* acknowledged; 0: uncertain (failed or timed out) */
    uint8_t resent; /* liblapse may have sent it more than once (put, batch
                       put, delete: retried after a timeout), so it may have
                       applied more than once, each time with a record */
} mwrite;

typedef struct mkey {
    uint8_t ncand;  /* 0: never written */
    uint8_t frozen; /* see invariant 2 */
    uint8_t planted;
    mstate cand[MODEL_CANDS];
    uint32_t nops;
    mwrite *log; /* owned: every call, nlog of them (capacity caplog) */
    uint32_t nlog, caplog;
    int64_t last_wall_ms; /* when its last call returned */
    char last_op[112];
} mkey;

typedef struct mtable {
    char name[48];
    int ttl;          /* TTL is (to be) enabled: settle waits for ENABLED */
    int ttl_resolved; /* ENABLE acknowledged (or a retry said "already enabled"):
                         settle must not enable it again, which could hide a lost config */
    int indexed;      /* sort key Sk (always 0), the LSI, the GSI and the stream
                         (workload.h): invariants 4 and 5 are checked on it */
    int nkeys;
    int spare_lo; /* keys [spare_lo, nkeys) are the workload's reserve (workload.h);
                     nkeys when it has none */
    mkey *keys;
} mtable;

/* A table created while the coordinator was being killed. */
typedef struct mcreated {
    char name[48];
    int acked;     /* CreateTable returned success */
    int exists;    /* resolved: a retry succeeded or said it exists */
    int recreated; /* the first retry after the restart created it anew */
} mcreated;

typedef struct model {
    int ntables;
    mtable t[MODEL_MAX_TABLES];
    int ncreated;
    mcreated created[MODEL_MAX_CREATED];
} model;

/* How a call changes a key. */
typedef enum model_mode {
    MM_REPLACE, /* put, delete, or an update that sets or removes the TTL */
    MM_PAYLOAD  /* an update that leaves the TTL alone */
} model_mode;

/* Adds a table of nkeys keys. Returns its index, or -1 when full or OOM. */
int model_add_table(model *m, const char *name, int nkeys, int ttl);
void model_fini(model *m);

/* "k<idx>" into buf. */
void model_key_name(int idx, char *buf, size_t len);

/* Draws a TTL value of class cls for a write at now_ms (run ends at
 * until_ms): *json gets the attribute's DynamoDB JSON ("" for TC_NONE) and
 * st->kind/ttl_s its meaning. */
void model_gen_ttl(uint64_t *rng, int cls, int64_t now_ms, int64_t until_ms, char *json, size_t len,
                   mstate *st);

/* Whether s expires in table t, judged at now_ms; *due_ms gets its due
 * instant. */
int model_expires(const mtable *t, const mstate *s, int64_t now_ms, int64_t *due_ms);

/* Records a call on k that would leave it in *next: rv 0 acknowledged,
 * anything else uncertain. ack_wall_ms is when it returned; resent: the
 * client retries such a call after a timeout (mwrite.resent). The call is
 * appended to k->log (a delete when mode is MM_REPLACE and next is absent);
 * should that allocation fail the process aborts (a harness failure, not
 * a Lapse one). */
void model_record(const mtable *t, mkey *k, const mstate *next, model_mode mode, int rv, int resent,
                  int64_t ack_wall_ms, const char *what);

/* Judges one key against what a read found (found, found_ver) after the
 * cluster settled at settle_ms, the reads ending at read_end_ms. Returns 0
 * when the finding is allowed, else the invariant it breaks (1, 2 or 3),
 * with what was expected in expected. */
int model_judge(const mtable *t, const mkey *k, int found, uint64_t found_ver, int64_t settle_ms,
                int64_t read_end_ms, char *expected, size_t len);

/* Whether k must be absent once the cluster settled at settle_ms (every
 * candidate says gone). */
int model_must_be_gone(const mtable *t, const mkey *k, int64_t settle_ms);

/* What the checker expects of a key, for the report's breakdown. */
typedef enum model_class {
    MC_UNWRITTEN,      /* never written: absent */
    MC_DELETED,        /* user-deleted: absent */
    MC_DUE_GONE,       /* eligible TTL due before the settle instant: gone */
    MC_DUE_LATER,      /* eligible TTL due after it: present (or gone near the edge) */
    MC_PROTECTED,      /* TTL extended or removed while (nearly) due: present */
    MC_NEVER_ELIGIBLE, /* non-number, too old or out-of-range TTL: present */
    MC_NO_TTL,         /* no TTL attribute, or a table without TTL: present */
    MC_UNCERTAIN,      /* more than one allowed outcome */
    MC_COUNT
} model_class;

extern const char *const model_class_names[MC_COUNT];

int model_classify(const mtable *t, const mkey *k, int64_t settle_ms);

/* Whether k is a safe key to plant a violation on: one candidate, present,
 * never expiring. */
int model_stable_present(const mtable *t, const mkey *k, int64_t now_ms);

#endif
