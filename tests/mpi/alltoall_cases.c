/* An ordinary MPI program, written without any knowledge of fast: it runs MPI_Alltoall(v) in
 * the ways real codes do, checks every received element, and writes each rank's receive buffers
 * to files, so that a run with libfast_mpi can be compared byte for byte with a run without.
 *
 *   alltoall_cases OUTDIR [CASE...]      cases (default: all): v_int v_double a_int v_contig
 *                                        v_strided v_inplace split_dup progress nonblocking
 *                                        persistent threshold
 *   alltoall_cases OUTDIR repeat CALLS   CALLS skewed MPI_Alltoallv calls; resident memory must
 *                                        stay flat (exit status 1 if it grows by over 8 MiB)
 *   alltoall_cases OUTDIR errors         mismatched counts: prints what each rank saw
 *
 * OUTDIR/CASE.RANK holds rank RANK's receive buffer(s) of CASE. Exit status 0 when every rank's
 * checks passed. */
#include <mpi.h>
#if defined(OPEN_MPI)
#include <mpi-ext.h>
#endif

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int rank_, size_, failures_;
static const char* outdir_;

static void fail(const char* what, int a, int b) {
    ++failures_;
    fprintf(stderr, "[rank %d] FAIL: %s (%d, %d)\n", rank_, what, a, b);
}

/* Deterministic values: element k of the block rank i sends rank j in case c. */
static uint32_t value(int c, int i, int j, int k) {
    uint64_t x = ((uint64_t)c << 48) ^ ((uint64_t)i << 32) ^ ((uint64_t)j << 20) ^ (uint64_t)k;
    x ^= x >> 33, x *= 0xff51afd7ed558ccdULL, x ^= x >> 33, x *= 0xc4ceb9fe1a85ec53ULL, x ^= x >> 33;
    return (uint32_t)x;
}

/* Skewed element counts from i to j: a few hot destinations, seeded by the case. */
static int skewed(int c, int i, int j, int scale) {
    const int hot = (i + c) % size_ == j || (j * 7 + c) % size_ == 0;
    return (int)(value(c, i, j, -1) % (uint32_t)scale) + (hot ? 4 * scale : 0);
}

static void dump(const char* name, const void* buf, size_t bytes) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.%d", outdir_, name, rank_);
    FILE* f = fopen(path, "wb");
    if (f == NULL || fwrite(buf, 1, bytes, f) != bytes) fail("cannot write the dump", 0, 0);
    if (f != NULL) fclose(f);
}

/* The layout of one side: counts[j] elements at displs[j] (in elements of the type's extent),
 * blocks in reverse rank order with a gap of `gap` elements after each. Returns the extent
 * needed, in elements. */
static int layout_n(int n, const int* counts, int* displs, int gap) {
    int at = 0;
    for (int j = n - 1; j >= 0; --j) displs[j] = at, at += counts[j] + gap;
    return at;
}
static int layout(const int* counts, int* displs, int gap) { return layout_n(size_, counts, displs, gap); }

/* MPI_Alltoallv of 32-bit values (MPI_INT or a contiguous type of `per` ints) in comm. */
static void run_v(int c, MPI_Comm comm, MPI_Datatype type, int per, int scale) {
    int n, me;
    MPI_Comm_size(comm, &n);
    MPI_Comm_rank(comm, &me);
    int* sc = calloc(4 * (size_t)n, sizeof(int));
    int *sd = sc + n, *rc = sc + 2 * n, *rd = sc + 3 * n;
    for (int j = 0; j < n; ++j) sc[j] = skewed(c, me, j, scale), rc[j] = skewed(c, j, me, scale);
    const int slen = layout_n(n, sc, sd, 1) * per, rlen = layout_n(n, rc, rd, 2) * per;
    uint32_t* s = malloc(sizeof(uint32_t) * (size_t)(slen + 1));
    uint32_t* r = malloc(sizeof(uint32_t) * (size_t)(rlen + 1));
    memset(s, 0xAB, sizeof(uint32_t) * (size_t)(slen + 1));
    memset(r, 0xEE, sizeof(uint32_t) * (size_t)(rlen + 1));
    for (int j = 0; j < n; ++j)
        for (int k = 0; k < sc[j] * per; ++k) s[sd[j] * per + k] = value(c, me, j, k);
    if (MPI_Alltoallv(s, sc, sd, type, r, rc, rd, type, comm) != MPI_SUCCESS) fail("MPI_Alltoallv", c, 0);
    for (int i = 0; i < n; ++i)
        for (int k = 0; k < rc[i] * per; ++k)
            if (r[rd[i] * per + k] != value(c, i, me, k)) {
                fail("wrong element from rank", i, k);
                break;
            }
    char name[64];
    snprintf(name, sizeof name, "v%d_%d", c, n);
    dump(name, r, sizeof(uint32_t) * (size_t)rlen);
    free(s), free(r), free(sc);
}

static void case_v_double(void) {
    const int c = 2;
    int* sc = calloc(4 * (size_t)size_, sizeof(int));
    int *sd = sc + size_, *rc = sc + 2 * size_, *rd = sc + 3 * size_;
    for (int j = 0; j < size_; ++j) sc[j] = skewed(c, rank_, j, 3000), rc[j] = skewed(c, j, rank_, 3000);
    const int slen = layout(sc, sd, 0), rlen = layout(rc, rd, 3);
    double* s = malloc(sizeof(double) * (size_t)(slen + 1));
    double* r = malloc(sizeof(double) * (size_t)(rlen + 1));
    for (int j = 0; j < size_; ++j)
        for (int k = 0; k < sc[j]; ++k) s[sd[j] + k] = value(c, rank_, j, k) / 7.0;
    for (int k = 0; k < rlen; ++k) r[k] = -1.5;
    MPI_Alltoallv(s, sc, sd, MPI_DOUBLE, r, rc, rd, MPI_DOUBLE, MPI_COMM_WORLD);
    for (int i = 0; i < size_; ++i)
        for (int k = 0; k < rc[i]; ++k)
            if (r[rd[i] + k] != value(c, i, rank_, k) / 7.0) {
                fail("wrong double from rank", i, k);
                break;
            }
    dump("v_double", r, sizeof(double) * (size_t)rlen);
    free(s), free(r), free(sc);
}

static void case_a_int(void) {
    const int c = 3, count = 6000;
    int* s = malloc(sizeof(int) * (size_t)count * (size_t)size_);
    int* r = malloc(sizeof(int) * (size_t)count * (size_t)size_);
    for (int j = 0; j < size_; ++j)
        for (int k = 0; k < count; ++k) s[j * count + k] = (int)value(c, rank_, j, k);
    MPI_Alltoall(s, count, MPI_INT, r, count, MPI_INT, MPI_COMM_WORLD);
    for (int i = 0; i < size_; ++i)
        for (int k = 0; k < count; ++k)
            if (r[i * count + k] != (int)value(c, i, rank_, k)) {
                fail("wrong MPI_Alltoall element from rank", i, k);
                break;
            }
    dump("a_int", r, sizeof(int) * (size_t)count * (size_t)size_);
    free(s), free(r);
}

static void case_v_contig(void) {
    MPI_Datatype triple;
    MPI_Type_contiguous(3, MPI_INT, &triple);
    MPI_Type_commit(&triple);
    run_v(4, MPI_COMM_WORLD, triple, 3, 2000);
    MPI_Type_free(&triple);
}

/* Every other int of a buffer: a strided type (2 ints, stride 2: size 8 bytes, extent 12). */
static MPI_Datatype strided_type(void) {
    MPI_Datatype t;
    MPI_Type_vector(2, 1, 2, MPI_INT, &t);
    MPI_Type_commit(&t);
    return t;
}

static void check_strided(int c, const int* r, const int* rc, const int* rd) {
    for (int i = 0; i < size_; ++i)
        for (int k = 0; k < rc[i]; ++k)
            for (int e = 0; e < 2; ++e)
                if (r[(rd[i] + k) * 3 + 2 * e] != (int)value(c, i, rank_, 2 * k + e)) {
                    fail("wrong strided element from rank", i, k);
                    return;
                }
}

static void strided(int c, int nonblocking) {
    MPI_Datatype t = strided_type();
    int* sc = calloc(4 * (size_t)size_, sizeof(int));
    int *sd = sc + size_, *rc = sc + 2 * size_, *rd = sc + 3 * size_;
    for (int j = 0; j < size_; ++j) sc[j] = skewed(c, rank_, j, 2000), rc[j] = skewed(c, j, rank_, 2000);
    const int slen = layout(sc, sd, 0) * 3 + 1, rlen = layout(rc, rd, 1) * 3 + 1;
    int* s = malloc(sizeof(int) * (size_t)slen);
    int* r = malloc(sizeof(int) * (size_t)rlen);
    memset(s, 0x11, sizeof(int) * (size_t)slen);
    memset(r, 0xEE, sizeof(int) * (size_t)rlen);
    for (int j = 0; j < size_; ++j)
        for (int k = 0; k < sc[j]; ++k)
            for (int e = 0; e < 2; ++e) s[(sd[j] + k) * 3 + 2 * e] = (int)value(c, rank_, j, 2 * k + e);
    if (nonblocking) {
        MPI_Request q;
        MPI_Ialltoallv(s, sc, sd, t, r, rc, rd, t, MPI_COMM_WORLD, &q);
        MPI_Type_free(&t); /* allowed while the call runs */
        MPI_Wait(&q, MPI_STATUS_IGNORE);
    } else {
        MPI_Alltoallv(s, sc, sd, t, r, rc, rd, t, MPI_COMM_WORLD);
        MPI_Type_free(&t);
    }
    check_strided(c, r, rc, rd);
    dump(nonblocking ? "v_strided_nb" : "v_strided", r, sizeof(int) * (size_t)rlen);
    free(s), free(r), free(sc);
}

static void case_v_inplace(void) {
    const int c = 6;
    int* rc = calloc(2 * (size_t)size_, sizeof(int));
    int* rd = rc + size_;
    /* In place, rank i sends j as much as it receives from j: a symmetric matrix. */
    for (int j = 0; j < size_; ++j) rc[j] = skewed(c, rank_ < j ? rank_ : j, rank_ < j ? j : rank_, 3000);
    const int rlen = layout(rc, rd, 1);
    uint32_t* r = malloc(sizeof(uint32_t) * (size_t)(rlen + 1));
    memset(r, 0xEE, sizeof(uint32_t) * (size_t)(rlen + 1));
    for (int j = 0; j < size_; ++j)
        for (int k = 0; k < rc[j]; ++k) r[rd[j] + k] = value(c, rank_, j, k);
    MPI_Alltoallv(MPI_IN_PLACE, NULL, NULL, MPI_DATATYPE_NULL, r, rc, rd, MPI_UINT32_T, MPI_COMM_WORLD);
    for (int i = 0; i < size_; ++i)
        for (int k = 0; k < rc[i]; ++k)
            if (r[rd[i] + k] != value(c, i, rank_, k)) {
                fail("wrong in-place element from rank", i, k);
                break;
            }
    dump("v_inplace", r, sizeof(uint32_t) * (size_t)rlen);
    free(r), free(rc);
}

static void case_split_dup(void) {
    MPI_Comm half, dup;
    MPI_Comm_split(MPI_COMM_WORLD, rank_ % 2, rank_, &half);
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    run_v(7, half, MPI_INT, 1, 8000);
    run_v(8, dup, MPI_INT, 1, 8000);
    run_v(9, half, MPI_INT, 1, 8000); /* the same communicators again: their cached state */
    MPI_Comm_free(&half);
    MPI_Comm_free(&dup);
    MPI_Comm_split(MPI_COMM_WORLD, 0, size_ - rank_, &half); /* reversed ranks */
    run_v(10, half, MPI_INT, 1, 8000);
    MPI_Comm_free(&half);
}

/* One skewed MPI_INT exchange's arguments and buffers, for the nonblocking and persistent cases. */
struct exchange {
    int *sc, *sd, *rc, *rd;
    uint32_t *s, *r;
    int slen, rlen, c;
};

static void exchange_make(struct exchange* x, int c) {
    x->c = c;
    x->sc = calloc(4 * (size_t)size_, sizeof(int));
    x->sd = x->sc + size_, x->rc = x->sc + 2 * size_, x->rd = x->sc + 3 * size_;
    for (int j = 0; j < size_; ++j) x->sc[j] = skewed(c, rank_, j, 4000), x->rc[j] = skewed(c, j, rank_, 4000);
    x->slen = layout(x->sc, x->sd, 0), x->rlen = layout(x->rc, x->rd, 1);
    x->s = malloc(sizeof(uint32_t) * (size_t)(x->slen + 1));
    x->r = malloc(sizeof(uint32_t) * (size_t)(x->rlen + 1));
}

/* Fills the send side for round `round` and clears the receive side. */
static void exchange_fill(struct exchange* x, int round) {
    for (int j = 0; j < size_; ++j)
        for (int k = 0; k < x->sc[j]; ++k) x->s[x->sd[j] + k] = value(x->c + round, rank_, j, k);
    memset(x->r, 0xEE, sizeof(uint32_t) * (size_t)(x->rlen + 1));
}

static void exchange_check(struct exchange* x, int round, const char* name) {
    for (int i = 0; i < size_; ++i)
        for (int k = 0; k < x->rc[i]; ++k)
            if (x->r[x->rd[i] + k] != value(x->c + round, i, rank_, k)) {
                fail(name, i, k);
                return;
            }
    char file[64];
    snprintf(file, sizeof file, "%s_%d", name, round);
    dump(file, x->r, sizeof(uint32_t) * (size_t)x->rlen);
}

static void exchange_free(struct exchange* x) { free(x->s), free(x->r), free(x->sc); }

/* Point-to-point traffic beside the collectives: 1 MiB around a ring. */
enum { ring_ints = 1 << 18 };
static void ring_post(int* out, int* in, MPI_Request* q, int tag) {
    for (int k = 0; k < ring_ints; ++k) out[k] = (int)value(tag, rank_, 0, k);
    MPI_Irecv(in, ring_ints, MPI_INT, (rank_ + size_ - 1) % size_, tag, MPI_COMM_WORLD, &q[0]);
    MPI_Isend(out, ring_ints, MPI_INT, (rank_ + 1) % size_, tag, MPI_COMM_WORLD, &q[1]);
}

static void ring_check(const int* in, int tag) {
    const int from = (rank_ + size_ - 1) % size_;
    for (int k = 0; k < ring_ints; ++k)
        if (in[k] != (int)value(tag, from, 0, k)) {
            fail("wrong ring element", from, k);
            return;
        }
}

/* A blocking collective while its partner waits in MPI_Recv for this rank's earlier MPI_Isend
 * (1 MiB, beyond MPI's eager sizes): MPI must progress while the collective runs, or the
 * partner never reaches it. The first call sets the communicator up (in MPI calls of its own). */
static void case_progress(void) {
    struct exchange a;
    exchange_make(&a, 30);
    exchange_fill(&a, 0);
    MPI_Alltoallv(a.s, a.sc, a.sd, MPI_UINT32_T, a.r, a.rc, a.rd, MPI_UINT32_T, MPI_COMM_WORLD);
    exchange_check(&a, 0, "progress");
    exchange_fill(&a, 1);
    int* out = malloc(sizeof(int) * ring_ints * 2);
    int* in = out + ring_ints;
    for (int k = 0; k < ring_ints; ++k) out[k] = (int)value(31, rank_, 0, k);
    const int partner = rank_ ^ 1;
    MPI_Request q = MPI_REQUEST_NULL;
    if (partner < size_ && rank_ % 2 == 0) MPI_Isend(out, ring_ints, MPI_INT, partner, 9, MPI_COMM_WORLD, &q);
    if (partner < size_ && rank_ % 2 == 1) {
        MPI_Recv(in, ring_ints, MPI_INT, partner, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        for (int k = 0; k < ring_ints; ++k)
            if (in[k] != (int)value(31, partner, 0, k)) {
                fail("wrong element sent before the collective", partner, k);
                break;
            }
    }
    MPI_Alltoallv(a.s, a.sc, a.sd, MPI_UINT32_T, a.r, a.rc, a.rd, MPI_UINT32_T, MPI_COMM_WORLD);
    MPI_Wait(&q, MPI_STATUS_IGNORE);
    exchange_check(&a, 1, "progress");
    exchange_free(&a);
    free(out);
}

static void case_nonblocking(void) {
    struct exchange a, b;
    exchange_make(&a, 20), exchange_make(&b, 21);
    int* out = malloc(sizeof(int) * ring_ints * 2);
    int* in = out + ring_ints;
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    /* Overlapped with point-to-point traffic and a second collective on another communicator,
     * completed together in one MPI_Waitall, then by MPI_Test. */
    MPI_Request q[4];
    exchange_fill(&a, 0), exchange_fill(&b, 0);
    MPI_Ialltoallv(a.s, a.sc, a.sd, MPI_UINT32_T, a.r, a.rc, a.rd, MPI_UINT32_T, MPI_COMM_WORLD, &q[0]);
    ring_post(out, in, &q[1], 5);
    MPI_Ialltoallv(b.s, b.sc, b.sd, MPI_UINT32_T, b.r, b.rc, b.rd, MPI_UINT32_T, dup, &q[3]);
    int token = rank_, got = -1; /* a blocking exchange while both run */
    MPI_Sendrecv(&token, 1, MPI_INT, (rank_ + 1) % size_, 6, &got, 1, MPI_INT, (rank_ + size_ - 1) % size_, 6,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Waitall(3, q, MPI_STATUSES_IGNORE);
    for (int flag = 0; !flag;) MPI_Test(&q[3], &flag, MPI_STATUS_IGNORE);
    exchange_check(&a, 0, "nb_a"), exchange_check(&b, 0, "nb_b"), ring_check(in, 5);
    /* A rank blocked in MPI_Recv for a partner that first waits for the collective to finish. */
    exchange_fill(&a, 1);
    MPI_Ialltoallv(a.s, a.sc, a.sd, MPI_UINT32_T, a.r, a.rc, a.rd, MPI_UINT32_T, MPI_COMM_WORLD, &q[0]);
    const int partner = rank_ ^ 1;
    if (partner < size_ && rank_ % 2 == 0) {
        MPI_Recv(in, ring_ints, MPI_INT, partner, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Wait(&q[0], MPI_STATUS_IGNORE);
    } else {
        MPI_Wait(&q[0], MPI_STATUS_IGNORE);
        if (partner < size_) MPI_Send(out, ring_ints, MPI_INT, partner, 7, MPI_COMM_WORLD);
    }
    exchange_check(&a, 1, "nb_a");
    /* MPI_Ialltoall completed by MPI_Waitany and MPI_Waitsome beside a ring exchange. */
    exchange_fill(&b, 2);
    const int count = 5000;
    int* s = malloc(sizeof(int) * (size_t)count * (size_t)size_ * 2);
    int* r = s + (size_t)count * (size_t)size_;
    for (int j = 0; j < size_; ++j)
        for (int k = 0; k < count; ++k) s[j * count + k] = (int)value(22, rank_, j, k);
    MPI_Ialltoall(s, count, MPI_INT, r, count, MPI_INT, dup, &q[0]);
    ring_post(out, in, &q[1], 8);
    MPI_Ialltoallv(b.s, b.sc, b.sd, MPI_UINT32_T, b.r, b.rc, b.rd, MPI_UINT32_T, MPI_COMM_WORLD, &q[3]);
    int index, done = 0, outcount, indices[4];
    MPI_Waitany(4, q, &index, MPI_STATUS_IGNORE);
    for (done = 1; done < 4; done += outcount) {
        MPI_Waitsome(4, q, &outcount, indices, MPI_STATUSES_IGNORE);
        if (outcount == MPI_UNDEFINED) break;
    }
    for (int i = 0; i < size_; ++i)
        for (int k = 0; k < count; ++k)
            if (r[i * count + k] != (int)value(22, i, rank_, k)) {
                fail("wrong MPI_Ialltoall element from rank", i, k);
                break;
            }
    exchange_check(&b, 2, "nb_b"), ring_check(in, 8);
    dump("nb_ialltoall", r, sizeof(int) * (size_t)count * (size_t)size_);
    free(s), free(out), exchange_free(&a), exchange_free(&b);
    MPI_Comm_free(&dup);
    strided(23, 1);
}

static void case_persistent(void) {
#if defined(OMPI_HAVE_MPI_EXT_PCOLLREQ)
    struct exchange a;
    exchange_make(&a, 30);
    int* out = malloc(sizeof(int) * ring_ints * 2);
    int* in = out + ring_ints;
    MPI_Request q[3];
    MPIX_Alltoallv_init(a.s, a.sc, a.sd, MPI_UINT32_T, a.r, a.rc, a.rd, MPI_UINT32_T, MPI_COMM_WORLD, MPI_INFO_NULL, &q[0]);
    for (int round = 0; round < 4; ++round) {
        exchange_fill(&a, round);
        MPI_Start(&q[0]);
        ring_post(out, in, &q[1], 40 + round);
        MPI_Waitall(3, q, MPI_STATUSES_IGNORE);
        exchange_check(&a, round, "persistent_v"), ring_check(in, 40 + round);
    }
    MPI_Request_free(&q[0]);
    const int count = 6000;
    int* s = malloc(sizeof(int) * (size_t)count * (size_t)size_ * 2);
    int* r = s + (size_t)count * (size_t)size_;
    MPIX_Alltoall_init(s, count, MPI_INT, r, count, MPI_INT, MPI_COMM_WORLD, MPI_INFO_NULL, &q[0]);
    for (int round = 0; round < 3; ++round) {
        for (int j = 0; j < size_; ++j)
            for (int k = 0; k < count; ++k) s[j * count + k] = (int)value(50 + round, rank_, j, k);
        MPI_Startall(1, q);
        MPI_Wait(&q[0], MPI_STATUS_IGNORE);
        for (int i = 0; i < size_; ++i)
            if (r[i * count + count - 1] != (int)value(50 + round, i, rank_, count - 1)) fail("persistent alltoall", i, round);
    }
    dump("persistent_a", r, sizeof(int) * (size_t)count * (size_t)size_);
    MPI_Request_free(&q[0]);
    free(s), free(out), exchange_free(&a);
#endif
}

/* Rank 0 sends and receives little, the others much: below a threshold for rank 0 only. */
static void case_threshold(void) {
    struct exchange x;
    exchange_make(&x, 60);
    for (int j = 0; j < size_; ++j) {
        x.sc[j] = rank_ == 0 || j == 0 ? 10 : 20000;
        x.rc[j] = rank_ == 0 || j == 0 ? 10 : 20000;
    }
    x.slen = layout(x.sc, x.sd, 0), x.rlen = layout(x.rc, x.rd, 0);
    x.s = realloc(x.s, sizeof(uint32_t) * (size_t)(x.slen + 1));
    x.r = realloc(x.r, sizeof(uint32_t) * (size_t)(x.rlen + 1));
    exchange_fill(&x, 0);
    MPI_Alltoallv(x.s, x.sc, x.sd, MPI_UINT32_T, x.r, x.rc, x.rd, MPI_UINT32_T, MPI_COMM_WORLD);
    exchange_check(&x, 0, "threshold");
    exchange_free(&x);
}

static long resident_kib(void) {
    long pages = 0, resident = 0;
    FILE* f = fopen("/proc/self/statm", "r");
    if (f == NULL || fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    if (f != NULL) fclose(f);
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

/* `calls` MPI_Alltoallv calls alternating between two skewed matrices, each checked at the
 * ends of every block; resident memory measured after a tenth of them and at the end. */
static void case_repeat(int calls) {
    struct exchange x[2];
    exchange_make(&x[0], 70), exchange_make(&x[1], 71);
    long before = 0;
    for (int n = 0; n < calls; ++n) {
        struct exchange* e = &x[n % 2];
        for (int j = 0; j < size_; ++j)
            for (int k = 0; k < e->sc[j]; ++k) e->s[e->sd[j] + k] = (uint32_t)(n * 131 + rank_ * 7 + j + k);
        MPI_Alltoallv(e->s, e->sc, e->sd, MPI_UINT32_T, e->r, e->rc, e->rd, MPI_UINT32_T, MPI_COMM_WORLD);
        for (int i = 0; i < size_; ++i)
            if (e->rc[i] > 0 && (e->r[e->rd[i]] != (uint32_t)(n * 131 + i * 7 + rank_) ||
                                 e->r[e->rd[i] + e->rc[i] - 1] != (uint32_t)(n * 131 + i * 7 + rank_ + e->rc[i] - 1))) {
                fail("wrong element in repeated call", n, i);
                n = calls;
                break;
            }
        if (n + 1 == calls / 10) before = resident_kib();
    }
    const long growth = resident_kib() - before;
    if (rank_ == 0) printf("alltoall_cases: resident memory grew by %ld KiB over %d calls\n", growth, calls - calls / 10);
    if (growth > 8 * 1024) fail("resident memory grew by more than 8 MiB", (int)growth, calls);
    exchange_free(&x[0]), exchange_free(&x[1]);
}

static int handler_calls_;
static void on_error(MPI_Comm* comm, int* code, ...) {
    (void)comm;
    int cls = 0;
    MPI_Error_class(*code, &cls);
    ++handler_calls_;
    printf("rank %d: error handler called, class %s\n", rank_, cls == MPI_ERR_TRUNCATE ? "MPI_ERR_TRUNCATE" : "other");
}

/* Mismatched counts: rank 1 expects one element less from rank 0 than rank 0 sends. What each
 * rank saw is printed (the return code's class and string, the error handler's calls), then a
 * correct call on the same communicator. */
static void case_errors(void) {
    const int count = 20000;
    int* sc = calloc(4 * (size_t)size_, sizeof(int));
    int *sd = sc + size_, *rc = sc + 2 * size_, *rd = sc + 3 * size_;
    for (int j = 0; j < size_; ++j) sc[j] = rc[j] = count, sd[j] = rd[j] = j * count;
    int* s = calloc((size_t)count * (size_t)size_, sizeof(int));
    int* r = calloc((size_t)count * (size_t)size_, sizeof(int));
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    if (rank_ == 1) rc[0] = count - 1;
    int rc_code = MPI_Alltoallv(s, sc, sd, MPI_INT, r, rc, rd, MPI_INT, comm);
    int cls = MPI_SUCCESS, len = 0;
    char text[MPI_MAX_ERROR_STRING] = "";
    MPI_Error_class(rc_code, &cls);
    MPI_Error_string(rc_code, text, &len);
    printf("rank %d: returned %s, class %s: %s\n", rank_, rc_code == MPI_SUCCESS ? "success" : "an error",
           cls == MPI_ERR_TRUNCATE ? "MPI_ERR_TRUNCATE" : "other", text);
    MPI_Errhandler h;
    MPI_Comm_create_errhandler(on_error, &h);
    MPI_Comm_set_errhandler(comm, h);
    rc_code = MPI_Alltoallv(s, sc, sd, MPI_INT, r, rc, rd, MPI_INT, comm);
    printf("rank %d: with a handler: returned %s, handler called %d times\n", rank_,
           rc_code == MPI_SUCCESS ? "success" : "an error", handler_calls_);
    rc[0] = count;
    rc_code = MPI_Alltoallv(s, sc, sd, MPI_INT, r, rc, rd, MPI_INT, comm);
    printf("rank %d: next call %s\n", rank_, rc_code == MPI_SUCCESS ? "succeeded" : "failed");
    if (rc_code != MPI_SUCCESS) fail("a correct call after the mismatch failed", rc_code, 0);
    MPI_Errhandler_free(&h);
    MPI_Comm_free(&comm);
    free(s), free(r), free(sc);
}

static void run(const char* name) {
    if (!strcmp(name, "v_int")) run_v(1, MPI_COMM_WORLD, MPI_INT, 1, 5000);
    else if (!strcmp(name, "v_double")) case_v_double();
    else if (!strcmp(name, "a_int")) case_a_int();
    else if (!strcmp(name, "v_contig")) case_v_contig();
    else if (!strcmp(name, "v_strided")) strided(5, 0);
    else if (!strcmp(name, "v_inplace")) case_v_inplace();
    else if (!strcmp(name, "split_dup")) case_split_dup();
    else if (!strcmp(name, "progress")) case_progress();
    else if (!strcmp(name, "nonblocking")) case_nonblocking();
    else if (!strcmp(name, "persistent")) case_persistent();
    else if (!strcmp(name, "threshold")) case_threshold();
    else if (!strcmp(name, "errors")) case_errors();
    else fail("unknown case", 0, 0), fprintf(stderr, "unknown case '%s'\n", name);
}

int main(int argc, char** argv) {
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        printf("usage: alltoall_cases OUTDIR [CASE...] | OUTDIR repeat CALLS | OUTDIR errors\n"
               "cases: v_int v_double a_int v_contig v_strided v_inplace split_dup progress nonblocking persistent\n"
               "       threshold\n");
        return argc < 2 ? 2 : 0;
    }
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    outdir_ = argv[1];
    const char* all[] = {"v_int", "v_double", "a_int", "v_contig", "v_strided", "v_inplace",
                         "split_dup", "progress", "nonblocking", "persistent", "threshold"};
    if (argc > 3 && !strcmp(argv[2], "repeat")) case_repeat(atoi(argv[3]));
    else if (argc > 2)
        for (int k = 2; k < argc; ++k) run(argv[k]);
    else
        for (size_t k = 0; k < sizeof all / sizeof *all; ++k) run(all[k]);
    int total = 0;
    MPI_Allreduce(&failures_, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank_ == 0) printf("alltoall_cases: %s on %d ranks\n", total == 0 ? "every check passed" : "FAILED", size_);
    MPI_Finalize();
    return total == 0 ? 0 : 1;
}
