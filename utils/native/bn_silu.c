/* BatchNorm in training (batch statistics) followed by SiLU, forward and backward, over channels-last float32 or
 * bfloat16 tensors: a tensor of N images, C channels and H x W pixels is R = N*H*W rows of C values, row after row.
 *
 * Why: in a CPU training step BatchNorm and SiLU are memory-bound passes over every activation. Done as PyTorch's
 * separate kernels they read and write the data thirteen times a layer (BatchNorm forward 2 reads + 1 write, SiLU
 * 1 + 1, SiLU backward 2 + 1, BatchNorm backward 4 + 1) and autograd keeps both the BatchNorm input and its output.
 * Here the forward reads its input twice and writes once, the backward reads 4 times and writes twice, and only the
 * BatchNorm input is kept (the normalised value is recomputed from it). bfloat16 (the activations of bf16 autocast)
 * halves every move: values are widened to float32 as they are loaded, computed in float32 and rounded to nearest
 * even as they are stored (dL/d(BatchNorm output) too, between the two backward passes, as PyTorch's kernels
 * round it; the per-channel sums take the unrounded values). In bfloat16 the passes are bound by arithmetic (the
 * exp, the conversions) more than by memory.
 *
 * Numerics: per-channel sums are accumulated in double (PyTorch's channels-last statistics are float and were
 * measured 2e-4 relative from a float64 reference on a 16x32x320x320 tensor; these 2e-7). exp() is a polynomial
 * within 2e-7 relative of the correctly rounded value (for |SiLU| > 1e-30; below, about 0); a NaN propagates as in
 * PyTorch's kernels.
 *
 * Built by utils/native_build.py with -O3 -fno-trapping-math -fno-math-errno -fopenmp-simd (vectorised loops, no
 * change of rounding: no -ffast-math) and the instruction set PyTorch itself uses. Chunks of rows are shared out
 * between the calling thread and nthreads - 1 POSIX threads kept from call to call; every sum is combined in chunk
 * order, so results vary neither between runs nor with the number of threads. */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_THREADS 256
#define FLUSH_ROWS 128 /* float partial sums go into the double ones every FLUSH_ROWS rows */

static inline float exp_poly(float x) {
    /* exp(x) = 2^k * e^r, |r| <= ln2/2; e^r by a degree-7 polynomial (Cephes' expf coefficients). */
    union { float f; uint32_t u; } v;
    v.f = x;
    /* |x| <= 87.3 (2^k stays a normal float), clamped on the bits: a float compare-and-select here made gcc
     * specialise the whole function for the clamped values (compares, masks and blends: 10% of a bf16 pass).
     * A NaN becomes 87.3 in magnitude; callers multiply by their argument, so a NaN still comes out NaN. */
    uint32_t mag = v.u & 0x7fffffffu;
    mag = mag < 0x42ae999au ? mag : 0x42ae999au;
    v.u = (v.u & 0x80000000u) | mag;
    x = v.f;
    float k = __builtin_rintf(x * 1.44269504088896341f);
    float r = x - k * 0.693359375f + k * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    union { int32_t i; float f; } two_k;
    two_k.i = ((int32_t)k + 127) << 23;
    return p * two_k.f;
}

static inline float sigmoid(float y) { return 1.0f / (1.0f + exp_poly(-y)); }

/* ---- values: float32, or bfloat16 widened on load and rounded on store ---- */

/* bfloat16 is the high half of a float32: widening is exact; narrowing rounds to nearest even, as PyTorch's
 * c10::BFloat16 does (a NaN becomes 0x7fc0). Written with integer operations so the compiler vectorises them. */
static inline float from_bf16(uint16_t h) {
    union { uint32_t u; float f; } v;
    v.u = (uint32_t)h << 16;
    return v.f;
}

static inline uint16_t to_bf16(float f) {
    union { float f; uint32_t u; } v;
    v.f = f;
    uint32_t rounded = (v.u + 0x7fffu + ((v.u >> 16) & 1u)) >> 16;
    return (v.u & 0x7fffffffu) > 0x7f800000u ? (uint16_t)0x7fc0 : (uint16_t)rounded;
}

/* Element i of a float32 (bf16 == 0) or bfloat16 tensor. Every pass below is written once and inlined twice, with
 * bf16 a constant 0 or 1 (ALWAYS_INLINE), so each loop compiles to plain float or plain bfloat16 vector code. */
static inline float load(const void *restrict t, const int bf16, long i) {
    return bf16 ? from_bf16(((const uint16_t *)t)[i]) : ((const float *)t)[i];
}

static inline void store(void *restrict t, const int bf16, long i, float v) {
    if (bf16) ((uint16_t *)t)[i] = to_bf16(v);
    else ((float *)t)[i] = v;
}

#define ALWAYS_INLINE static inline __attribute__((always_inline))
#define FOR_BOTH_TYPES(bf16, call) do { if (bf16) call(1); else call(0); } while (0)

/* ---- the passes, each over rows [r0, r1) ---- */

ALWAYS_INLINE void stats_rows(const void *restrict x, const int bf16, long r0, long r1, long C, double *restrict s,
                              double *restrict q) {
    for (long r = r0; r < r1; r++) {
        _Pragma("omp simd") for (long c = 0; c < C; c++) {
            double v = load(x, bf16, r * C + c);
            s[c] += v;
            q[c] += v * v;
        }
    }
}

ALWAYS_INLINE void forward_rows(const void *restrict x, void *restrict out, const int bf16, long r0, long r1, long C,
                                const float *restrict scale, const float *restrict shift) {
    for (long r = r0; r < r1; r++) {
        _Pragma("omp simd") for (long c = 0; c < C; c++) {
            float y = load(x, bf16, r * C + c) * scale[c] + shift[c];
            store(out, bf16, r * C + c, y * sigmoid(y));
        }
    }
}

/* gy = dL/d(BatchNorm output) = g * silu'(y), stored in x's type into gy (the input gradient's memory: the next
 * pass turns it into dx in place); sums per channel of gy and of gy * (x - mean), from the unrounded values. */
ALWAYS_INLINE void backward_sum_rows(const void *restrict x, const void *restrict g, long gs, void *restrict gy,
                                     const int bf16, long r0, long r1, long C, const float *restrict scale,
                                     const float *restrict shift, const float *restrict mean, float *restrict fa,
                                     float *restrict fb, double *restrict sa, double *restrict sb) {
    long rows = 0;
    for (long c = 0; c < C; c++) fa[c] = fb[c] = 0.0f;
    for (long r = r0; r < r1; r++) {
        _Pragma("omp simd") for (long c = 0; c < C; c++) {
            float xv = load(x, bf16, r * C + c);
            float y = xv * scale[c] + shift[c];
            float s = sigmoid(y);
            float d = load(g, bf16, r * gs + c) * s * (1.0f + y * (1.0f - s));
            store(gy, bf16, r * C + c, d);
            fa[c] += d;
            fb[c] += d * (xv - mean[c]);
        }
        if (++rows == FLUSH_ROWS) {
            for (long c = 0; c < C; c++) {
                sa[c] += fa[c];
                sb[c] += fb[c];
                fa[c] = fb[c] = 0.0f;
            }
            rows = 0;
        }
    }
    for (long c = 0; c < C; c++) {
        sa[c] += fa[c];
        sb[c] += fb[c];
    }
}

/* dx = k1 * gy - k2 * (x - mean) - k0, in place over gy. */
ALWAYS_INLINE void backward_input_rows(const void *restrict x, void *gy, const int bf16, long r0, long r1, long C,
                                       const float *restrict mean, const float *restrict k0,
                                       const float *restrict k1, const float *restrict k2) {
    for (long r = r0; r < r1; r++) {
        _Pragma("omp simd") for (long c = 0; c < C; c++) {
            long i = r * C + c;
            store(gy, bf16, i, k1[c] * load(gy, bf16, i) - k2[c] * (load(x, bf16, i) - mean[c]) - k0[c]);
        }
    }
}

/* ---- threads: the rows in chunks that idle threads take, sums kept per chunk ---- */

/* A pass splits its rows into chunks (at least MIN_CHUNK_ROWS rows, at most MAX_CHUNKS of them, a number that
 * depends on the rows alone) and every thread takes the next chunk until none is left. A thread that starts late
 * or shares its core with other work (a data loader's process) then does less of the pass instead of holding
 * the others up at the end: on a 2-core machine with a busy loop on one core, the forward and backward of a
 * 16x128x80x80 bf16 layer took 7.3-8.3 and 9.6-9.9 ms against 9.8-10.0 and 12.2-13.1 ms with fixed halves. Sums
 * are kept per chunk and added in chunk order, so the results do not depend on the number of threads or on which
 * thread took which chunk. */
#define MIN_CHUNK_ROWS 256
#define MAX_CHUNKS 64

enum { STATS, FORWARD, BACKWARD_SUMS, BACKWARD_INPUT };

typedef struct {
    int pass, bf16;
    long R, C, gs, chunks, next; /* next: the next chunk to take (atomic) */
    const void *x, *g;
    void *out;
    const float *scale, *shift, *mean, *k0, *k1, *k2;
    double *sums; /* per chunk: C sums then C more, stride values apart */
    size_t stride;
} pass_t;

typedef struct {
    pass_t *p;
    float *fa, *fb; /* this thread's float partial sums (backward) */
} worker_t;

static void run_chunk(pass_t *p, worker_t *w, long chunk) {
    long r0 = p->R * chunk / p->chunks, r1 = p->R * (chunk + 1) / p->chunks, C = p->C;
    double *sa = p->sums ? p->sums + p->stride * chunk : NULL, *sb = sa ? sa + C : NULL;
#define STATS_(T) stats_rows(p->x, T, r0, r1, C, sa, sb)
#define FORWARD_(T) forward_rows(p->x, p->out, T, r0, r1, C, p->scale, p->shift)
#define SUMS_(T) backward_sum_rows(p->x, p->g, p->gs, p->out, T, r0, r1, C, p->scale, p->shift, p->mean, w->fa, w->fb, \
                                   sa, sb)
#define INPUT_(T) backward_input_rows(p->x, p->out, T, r0, r1, C, p->mean, p->k0, p->k1, p->k2)
    switch (p->pass) {
    case STATS: FOR_BOTH_TYPES(p->bf16, STATS_); break;
    case FORWARD: FOR_BOTH_TYPES(p->bf16, FORWARD_); break;
    case BACKWARD_SUMS: FOR_BOTH_TYPES(p->bf16, SUMS_); break;
    default: FOR_BOTH_TYPES(p->bf16, INPUT_);
    }
}

static void *work(void *arg) {
    worker_t *w = (worker_t *)arg;
    for (;;) {
        long chunk = __atomic_fetch_add(&w->p->next, 1, __ATOMIC_RELAXED);
        if (chunk >= w->p->chunks) return 0;
        run_chunk(w->p, w, chunk);
    }
}

/* ---- a pool of threads kept between passes ----
 *
 * A training step runs four passes a layer (about 230 for yolov5n), many of them 50-150 us long. Starting and joining
 * a POSIX thread costs about 40 us, and waking a sleeping one (on a virtual machine) about as much: forward and
 * backward of 2048 rows of 64 bf16 values took 219 us on one thread, and on two 333 us with threads started per pass,
 * 206 us with kept helpers that sleep between passes, 155 us as below (2-core Zen 4). So the helpers are started once
 * and kept; between the two passes of one call (statistics then output, or sums then input gradient: a few
 * microseconds apart) they spin for a while, and between calls (a convolution in between, milliseconds) they sleep on
 * a condition variable: a spinning thread there would take a core from the convolution's threads and the data loader's
 * processes. The caller spins while the helpers finish their last chunks, then sleeps if they have not. One pass uses
 * the pool at a time: a pass started while another holds it (a second Python thread: ctypes releases the GIL) runs on
 * its caller's thread alone, with the same results. A forked child has none of its parent's threads, so the pool
 * starts empty there. */
#define SPIN_NS 100000L /* how long a thread spins before it sleeps */

typedef struct {
    pthread_mutex_t lock; /* guards sleeping and waking, and starting helpers */
    pthread_cond_t wake, done;
    long generation;      /* atomic; incremented for every pass, after the fields below are set */
    worker_t *workers;    /* the current pass's workers; helper t works as workers[t] */
    int wanted;           /* threads in the current pass, the caller included */
    int spin_after;       /* another pass follows this one at once */
    int running;          /* atomic; helpers still working on the current pass */
    int sleepers, caller_sleeps;
    int size;             /* helpers started: threads 1..size */
    long born[MAX_THREADS];
} pool_t;

static pool_t pool = {.lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER,
                      .done = PTHREAD_COND_INITIALIZER};
static pthread_mutex_t pool_owner = PTHREAD_MUTEX_INITIALIZER; /* held by the pass using the pool */
static pthread_once_t fork_handler_once = PTHREAD_ONCE_INIT;

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

/* Spins up to SPIN_NS while *value equals `unwanted`; returns the last value read. */
static long spin_while_long(const long *value, long unwanted) {
    long v, start = now_ns();
    for (int i = 1; (v = __atomic_load_n(value, __ATOMIC_ACQUIRE)) == unwanted; i++) {
        cpu_relax();
        if (i % 64 == 0 && now_ns() - start > SPIN_NS) break;
    }
    return v;
}

/* Waits for a generation other than `seen`, spinning first if `spin`, then sleeping. */
static long next_generation(long seen, int spin) {
    long g = spin ? spin_while_long(&pool.generation, seen) : seen;
    if (g != seen) return g;
    pthread_mutex_lock(&pool.lock);
    while ((g = __atomic_load_n(&pool.generation, __ATOMIC_ACQUIRE)) == seen) {
        pool.sleepers++;
        pthread_cond_wait(&pool.wake, &pool.lock);
        pool.sleepers--;
    }
    pthread_mutex_unlock(&pool.lock);
    return g;
}

static void *helper(void *arg) {
    int t = (int)(intptr_t)arg;
    pthread_mutex_lock(&pool.lock);
    long seen = pool.born[t];
    pthread_mutex_unlock(&pool.lock);
    int spin = 0;
    for (;;) {
        long g = next_generation(seen, spin);
        worker_t *workers = __atomic_load_n(&pool.workers, __ATOMIC_RELAXED);
        int wanted = __atomic_load_n(&pool.wanted, __ATOMIC_RELAXED);
        int spin_after = __atomic_load_n(&pool.spin_after, __ATOMIC_RELAXED);
        /* A helper that takes no part in pass g may read the fields of pass g+1 already: then it looks again. A
         * helper that takes part holds pass g open until it is done, so its fields cannot change meanwhile. */
        if (__atomic_load_n(&pool.generation, __ATOMIC_ACQUIRE) != g) continue;
        seen = g;
        spin = spin_after;
        if (t >= wanted) continue;
        work(&workers[t]);
        if (__atomic_sub_fetch(&pool.running, 1, __ATOMIC_ACQ_REL) == 0) {
            pthread_mutex_lock(&pool.lock);
            if (pool.caller_sleeps) pthread_cond_signal(&pool.done);
            pthread_mutex_unlock(&pool.lock);
        }
    }
    return 0;
}

/* In a forked child: no helper exists and no pass is running (the child has one thread), whatever state the parent's
 * threads left the locks in. */
static void pool_after_fork_in_child(void) {
    pthread_mutex_init(&pool.lock, 0);
    pthread_cond_init(&pool.wake, 0);
    pthread_cond_init(&pool.done, 0);
    pthread_mutex_init(&pool_owner, 0);
    pool.size = pool.running = pool.wanted = pool.sleepers = pool.caller_sleeps = 0;
    pool.workers = 0;
}

static void register_fork_handler(void) { pthread_atfork(0, 0, pool_after_fork_in_child); }

/* Starts helpers up to `helpers` (pool.lock held, no pass running) and returns how many there are to use: fewer
 * where a thread could not start. */
static int pool_grow(int helpers) {
    while (pool.size < helpers) {
        pthread_t th;
        pthread_attr_t attr;
        int t = pool.size + 1;
        pool.born[t] = pool.generation;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int failed = pthread_create(&th, &attr, helper, (void *)(intptr_t)t);
        pthread_attr_destroy(&attr);
        if (failed) break;
        pool.size = t;
    }
    return pool.size < helpers ? pool.size : helpers;
}

/* Runs the pass on n threads (this one included); another_follows: the caller runs another pass right after this
 * one, so the helpers spin instead of sleeping. Where the pool is busy or no helper could start, the calling thread
 * takes every chunk: the results are the same, only slower. */
static void run_pass(pass_t *p, worker_t *workers, int n, int another_follows) {
    p->next = 0;
    if (n < 2) { work(&workers[0]); return; }
    pthread_once(&fork_handler_once, register_fork_handler);
    if (pthread_mutex_trylock(&pool_owner) != 0) { work(&workers[0]); return; }
    pthread_mutex_lock(&pool.lock);
    int helpers = pool_grow(n - 1);
    __atomic_store_n(&pool.workers, workers, __ATOMIC_RELAXED);
    __atomic_store_n(&pool.wanted, helpers + 1, __ATOMIC_RELAXED);
    __atomic_store_n(&pool.spin_after, another_follows, __ATOMIC_RELAXED);
    __atomic_store_n(&pool.running, helpers, __ATOMIC_RELAXED);
    __atomic_add_fetch(&pool.generation, 1, __ATOMIC_RELEASE);
    if (pool.sleepers) pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.lock);
    work(&workers[0]);
    long start = now_ns();
    for (int i = 1; __atomic_load_n(&pool.running, __ATOMIC_ACQUIRE) > 0; i++) {
        cpu_relax();
        if (i % 64 == 0 && now_ns() - start > SPIN_NS) {
            pthread_mutex_lock(&pool.lock);
            while (__atomic_load_n(&pool.running, __ATOMIC_ACQUIRE) > 0) {
                pool.caller_sleeps = 1;
                pthread_cond_wait(&pool.done, &pool.lock);
            }
            pool.caller_sleeps = 0;
            pthread_mutex_unlock(&pool.lock);
            break;
        }
    }
    pthread_mutex_unlock(&pool_owner);
}

static int clamp_threads(int n, long chunks) {
    if (n > MAX_THREADS) n = MAX_THREADS;
    if (n > chunks) n = (int)chunks;
    return n < 1 ? 1 : n;
}

static long chunks_for(long R) {
    long k = R / MIN_CHUNK_ROWS;
    return k < 1 ? 1 : (k > MAX_CHUNKS ? MAX_CHUNKS : k);
}

/* Zeroed blocks of count values of size bytes, each on cache lines of its own; *stride (out): the values from one
 * block to the next. Threads summing into neighbouring blocks would otherwise share the line at the boundary and
 * pass it between cores on every row: with 32 channels the statistics pass ran 3x slower on two threads than on
 * one, depending on where malloc happened to place the blocks. */
#define CACHE_LINE 64
static void *line_blocks(long n, size_t count, size_t size, size_t *stride) {
    size_t bytes = (count * size + CACHE_LINE - 1) / CACHE_LINE * CACHE_LINE;
    void *p = NULL;
    if (posix_memalign(&p, CACHE_LINE, bytes * (size_t)n) != 0) return NULL;
    *stride = bytes / size;
    return memset(p, 0, bytes * (size_t)n);
}

/* The two sums of channel c over all chunks, in chunk order. */
static void chunk_totals(const pass_t *p, long c, double *a, double *b) {
    *a = *b = 0;
    for (long k = 0; k < p->chunks; k++) {
        *a += p->sums[p->stride * k + c];
        *b += p->sums[p->stride * k + p->C + c];
    }
}

/* Forward over x of R rows of C values, float32 or (bf16 != 0) bfloat16; out has x's type, everything per channel
 * is float32. stats (out): 4*C floats, mean, invstd, scale = w*invstd, shift = b - mean*scale, for the backward.
 * running_mean/var are updated as torch.nn.BatchNorm2d does (momentum, unbiased variance). Returns 0, -2 when
 * memory ran out (nothing written), -3 for R < 2 (no variance; PyTorch raises there). */
int bn_silu_forward(const void *x, int bf16, long R, long C, const float *w, const float *b, float *running_mean,
                    float *running_var, double momentum, double eps, void *out, float *stats, int nthreads) {
    if (R < 2) return -3;
    pass_t p = {.pass = STATS, .bf16 = bf16, .R = R, .C = C, .chunks = chunks_for(R), .x = x, .out = out};
    int n = clamp_threads(nthreads, p.chunks);
    worker_t workers[MAX_THREADS];
    for (int t = 0; t < n; t++) workers[t] = (worker_t){.p = &p};
    p.sums = line_blocks(p.chunks, 2 * (size_t)C, sizeof(double), &p.stride);
    if (!p.sums) return -2;
    run_pass(&p, workers, n, 1);
    float *mean = stats, *invstd = stats + C, *scale = stats + 2 * C, *shift = stats + 3 * C;
    for (long c = 0; c < C; c++) {
        double s, q;
        chunk_totals(&p, c, &s, &q);
        double m = s / R, var = q / R - m * m;
        if (var < 0) var = 0;  /* rounding; a NaN stays NaN, as in PyTorch's statistics */
        double is = 1.0 / sqrt(var + eps);
        mean[c] = (float)m; invstd[c] = (float)is;
        scale[c] = (float)(w[c] * is); shift[c] = (float)(b[c] - m * w[c] * is);
        running_mean[c] = (float)((1.0 - momentum) * running_mean[c] + momentum * m);
        running_var[c] = (float)((1.0 - momentum) * running_var[c] + momentum * var * R / (R - 1));
    }
    p.pass = FORWARD; p.scale = scale; p.shift = shift;
    run_pass(&p, workers, n, 0);
    free(p.sums);
    return 0;
}

/* Backward. g: dL/d(output) in x's type, rows gs values apart (gs >= C: a channel slice of a wider channels-last
 * tensor). Writes dx (R*C values of x's type, dense; also the scratch for dL/d(BatchNorm output), so it is always
 * needed), dw and db (C floats each). want_dx 0 skips the input gradient's last pass. Returns 0, or -2 when memory
 * ran out (nothing valid written). */
int bn_silu_backward(const void *x, int bf16, long R, long C, const void *g, long gs, const float *w,
                     const float *stats, void *dx, float *dw, float *db, int want_dx, int nthreads) {
    const float *mean = stats, *invstd = stats + C, *scale = stats + 2 * C, *shift = stats + 3 * C;
    pass_t p = {.pass = BACKWARD_SUMS, .bf16 = bf16, .R = R, .C = C, .gs = gs, .chunks = chunks_for(R), .x = x,
                .g = g, .out = dx, .scale = scale, .shift = shift, .mean = mean};
    int n = clamp_threads(nthreads, p.chunks);
    size_t ps;
    p.sums = line_blocks(p.chunks, 2 * (size_t)C, sizeof(double), &p.stride);
    float *part = line_blocks(n, 2 * (size_t)C, sizeof(float), &ps);
    float *k0 = malloc(sizeof(float) * 3 * C), *k1 = k0 + C, *k2 = k1 + C;
    if (!p.sums || !part || !k0) { free(p.sums); free(part); free(k0); return -2; }
    worker_t workers[MAX_THREADS];
    for (int t = 0; t < n; t++) workers[t] = (worker_t){.p = &p, .fa = part + ps * t, .fb = part + ps * t + C};
    run_pass(&p, workers, n, want_dx);
    for (long c = 0; c < C; c++) {
        double sum_gy, sum_gyx;
        chunk_totals(&p, c, &sum_gy, &sum_gyx);
        double is = invstd[c];
        dw[c] = (float)(sum_gyx * is);
        db[c] = (float)sum_gy;
        k1[c] = (float)(w[c] * is);
        k0[c] = (float)(w[c] * is * sum_gy / R);
        k2[c] = (float)(w[c] * is * is * is * sum_gyx / R);
    }
    if (want_dx) {
        p.pass = BACKWARD_INPUT; p.k0 = k0; p.k1 = k1; p.k2 = k2;
        run_pass(&p, workers, n, 0);
    }
    free(p.sums); free(part); free(k0);
    return 0;
}
