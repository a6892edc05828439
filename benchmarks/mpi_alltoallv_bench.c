/* mpi_alltoallv_bench: times MPI_Alltoallv on skewed traffic. A plain MPI program that knows
 * nothing of fast: run it as is for the MPI library's MPI_Alltoallv, or with libfast_mpi
 * preloaded (LD_PRELOAD) for FAST's; benchmarks/emulated_cluster.sh --program/--compare runs it
 * on an emulated two-tier cluster.
 *
 *   mpirun -np R mpi_alltoallv_bench [options]
 *     --zipf S            pair sizes i.i.d. Zipf(S) on {1..1000}, scaled to --bytes per rank on
 *                         average (the zipf:S generator of fast-plan); may repeat
 *     --matrix FILE       R x R matrices of a matrix file (whitespace-separated integers, '#'
 *                         comments: the rows and flat formats of docs/formats.md), times --unit
 *     --unit BYTES        bytes per matrix entry (1)
 *     --every K           matrix files: take matrices 0, K, 2K, ... (1)
 *     --max-matrices N    matrix files: at most N matrices (10)
 *     --bytes B           generators: bytes each rank sends on average (16M; suffixes K, M, G)
 *     --seed N            generators' seed (1)
 *     -w N, -n N          untimed and timed calls per matrix (1, 5)
 * Every call's received bytes are checked (#wrong: wrong bytes, summed over ranks and calls).
 * Time is the slowest rank's time of a call, each rank starting when it leaves a barrier; a row
 * shows the median over calls (matrix files: the median over matrices of those medians).
 * algbw = average bytes per rank / time. */
#include <mpi.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank_, size_;

static void die(const char* what, const char* value) {
    if (rank_ == 0) fprintf(stderr, "mpi_alltoallv_bench: %s '%s' (see --help)\n", what, value);
    MPI_Finalize();
    exit(2);
}

static long long parse_bytes(const char* text) {
    char* end = NULL;
    const double v = strtod(text, &end);
    double scale = 1;
    if (end != NULL && (*end == 'K' || *end == 'k')) scale = 1024.0, ++end;
    else if (end != NULL && (*end == 'M' || *end == 'm')) scale = 1048576.0, ++end;
    else if (end != NULL && (*end == 'G' || *end == 'g')) scale = 1073741824.0, ++end;
    if (end == text || *end != '\0' || !(v >= 0)) die("not a byte count:", text);
    return (long long)(v * scale);
}

static uint64_t next(uint64_t* s) { /* splitmix64 */
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Bytes from i to j at m[i * R + j]: Zipf(s) draws on {1..1000}, scaled to `bytes` per rank. */
static void make_zipf(long long* m, double s, long long bytes, uint64_t seed) {
    double cdf[1000], acc = 0, sum = 0;
    for (int k = 0; k < 1000; ++k) cdf[k] = acc += pow(k + 1, -s);
    for (int i = 0; i < size_; ++i)
        for (int j = 0; j < size_; ++j) {
            const double u = (double)(next(&seed) >> 11) / 9007199254740992.0 * acc;
            int k = 0;
            while (k < 999 && cdf[k] <= u) ++k;
            m[i * size_ + j] = i == j ? 0 : k + 1;
            sum += (double)m[i * size_ + j];
        }
    for (int x = 0; x < size_ * size_; ++x) m[x] = sum > 0 ? llround((double)m[x] * (double)bytes * size_ / sum) : 0;
}

/* The matrices of a file: *count of them, every `every`-th, at most `most`. */
static long long* read_matrices(const char* path, long long unit, int every, int most, int* count) {
    FILE* f = fopen(path, "r");
    if (f == NULL) die("cannot read the matrix file", path);
    const size_t n = (size_t)size_ * (size_t)size_;
    long long* all = malloc(sizeof(long long) * n * (size_t)most);
    size_t e = 0; /* entries read */
    char line[8192];
    *count = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        if (line[0] == '#') continue;
        for (char* t = strtok(line, " \t\r\n"); t != NULL; t = strtok(NULL, " \t\r\n"), ++e) {
            const size_t q = e / n, slot = q / (size_t)every;
            if (q % (size_t)every != 0) continue;
            if (slot >= (size_t)most) goto done;
            all[slot * n + e % n] = atoll(t) * unit;
            if (e % n == n - 1) *count = (int)slot + 1;
        }
    }
done:
    fclose(f);
    if (*count == 0) die("no complete matrix for this number of ranks in", path);
    return all;
}

static unsigned char pattern(int from, int to, long long k, int call) { return (unsigned char)(from * 31 + to * 17 + k * 7 + call); }

static int compare_doubles(const void* a, const void* b) {
    const double x = *(const double*)a, y = *(const double*)b;
    return x < y ? -1 : x > y;
}

/* Runs one matrix: warmup + iters calls; returns the median time, adds wrong bytes to *wrong. */
static double run_matrix(const long long* m, int warmup, int iters, long long* wrong) {
    int *sc = malloc(sizeof(int) * 4 * (size_t)size_), *sd = sc + size_, *rc = sc + 2 * size_, *rd = sc + 3 * size_;
    long long st = 0, rt = 0;
    for (int j = 0; j < size_; ++j) {
        sc[j] = (int)m[rank_ * size_ + j], rc[j] = (int)m[j * size_ + rank_];
        sd[j] = (int)st, rd[j] = (int)rt, st += sc[j], rt += rc[j];
    }
    unsigned char* s = malloc((size_t)st + 1);
    unsigned char* r = malloc((size_t)rt + 1);
    double* times = malloc(sizeof(double) * (size_t)iters);
    for (int call = 0; call < warmup + iters; ++call) {
        for (int j = 0; j < size_; ++j)
            for (long long k = 0; k < sc[j]; ++k) s[sd[j] + k] = pattern(rank_, j, k, call);
        memset(r, 0, (size_t)rt + 1);
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = MPI_Wtime();
        MPI_Alltoallv(s, sc, sd, MPI_BYTE, r, rc, rd, MPI_BYTE, MPI_COMM_WORLD);
        double t = MPI_Wtime() - t0, slowest = 0;
        MPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (call >= warmup) times[call - warmup] = slowest;
        for (int i = 0; i < size_; ++i)
            for (long long k = 0; k < rc[i]; ++k) *wrong += r[rd[i] + k] != pattern(i, rank_, k, call);
    }
    qsort(times, (size_t)iters, sizeof(double), compare_doubles);
    const double median = times[iters / 2];
    free(s), free(r), free(times), free(sc);
    return median;
}

static void report(const char* workload, const long long* m, int matrices, const double* medians, long long wrong) {
    double sorted[1024], bytes = 0;
    memcpy(sorted, medians, sizeof(double) * (size_t)matrices);
    qsort(sorted, (size_t)matrices, sizeof(double), compare_doubles);
    for (int x = 0; x < size_ * size_ * matrices; ++x) bytes += (double)m[x];
    bytes /= (double)size_ * matrices;
    long long all = 0;
    MPI_Reduce(&wrong, &all, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    const double t = sorted[matrices / 2];
    if (rank_ == 0)
        printf("%-28s %14.0f %14.3f %12.3f %8lld\n", workload, bytes, t * 1e3, bytes / t / 1e6, all);
}

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    double zipf[64];
    int n_zipf = 0, every = 1, most = 10, warmup = 1, iters = 5;
    const char* file = NULL;
    long long unit = 1, bytes = 16 << 20;
    uint64_t seed = 1;
    for (int k = 1; k < argc; ++k) {
        const char* o = argv[k];
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            if (rank_ == 0) printf("usage: mpirun -np R mpi_alltoallv_bench [--zipf S]... [--matrix FILE [--unit B] [--every K]\n"
                                   "       [--max-matrices N]] [--bytes B] [--seed N] [-w N] [-n N]\n"
                                   "Times MPI_Alltoallv on skewed traffic (see the comment at the top of the source).\n");
            MPI_Finalize();
            return 0;
        }
        if (k + 1 >= argc) die("a value is missing after", o);
        const char* v = argv[++k];
        if (!strcmp(o, "--zipf") && n_zipf < 64) zipf[n_zipf++] = atof(v);
        else if (!strcmp(o, "--matrix")) file = v;
        else if (!strcmp(o, "--unit")) unit = parse_bytes(v);
        else if (!strcmp(o, "--every") && atoi(v) > 0) every = atoi(v);
        else if (!strcmp(o, "--max-matrices") && atoi(v) > 0 && atoi(v) <= 1024) most = atoi(v);
        else if (!strcmp(o, "--bytes")) bytes = parse_bytes(v);
        else if (!strcmp(o, "--seed")) seed = strtoull(v, NULL, 10);
        else if (!strcmp(o, "-w") && atoi(v) >= 0) warmup = atoi(v);
        else if (!strcmp(o, "-n") && atoi(v) > 0) iters = atoi(v);
        else die("unknown option or bad value:", o);
    }
    if (n_zipf == 0 && file == NULL) zipf[n_zipf++] = 1.2;
    if (rank_ == 0)
        printf("# %d ranks, %d untimed + %d timed calls per matrix\n%-28s %14s %14s %12s %8s\n", size_, warmup, iters,
               "workload", "bytes/rank", "median (ms)", "algbw (MB/s)", "#wrong");
    for (int z = 0; z < n_zipf; ++z) {
        long long* m = malloc(sizeof(long long) * (size_t)size_ * (size_t)size_);
        make_zipf(m, zipf[z], bytes, seed);
        long long wrong = 0;
        const double t = run_matrix(m, warmup, iters, &wrong);
        char name[64];
        snprintf(name, sizeof name, "zipf:%g", zipf[z]);
        report(name, m, 1, &t, wrong);
        free(m);
    }
    if (file != NULL) {
        int count = 0;
        long long* m = read_matrices(file, unit, every, most, &count);
        double medians[1024];
        long long wrong = 0;
        for (int q = 0; q < count; ++q) medians[q] = run_matrix(m + (size_t)q * size_ * size_, warmup, iters, &wrong);
        char name[64];
        snprintf(name, sizeof name, "file (%d matrices)", count);
        report(name, m, count, medians, wrong);
        free(m);
    }
    MPI_Finalize();
    return 0;
}
