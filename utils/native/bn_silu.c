/* BatchNorm in training (batch statistics) followed by SiLU, forward and backward, over channels-last float32
 * tensors: a tensor of N images, C channels and H x W pixels is R = N*H*W rows of C floats, row after row.
 *
 * Why: in a CPU training step BatchNorm and SiLU are memory-bound passes over every activation. Done as PyTorch's
 * separate kernels they read and write the data thirteen times a layer (BatchNorm forward 2 reads + 1 write, SiLU
 * 1 + 1, SiLU backward 2 + 1, BatchNorm backward 4 + 1) and autograd keeps both the BatchNorm input and its output.
 * Here the forward reads its input twice and writes once, the backward reads 4 times and writes twice, and only the
 * BatchNorm input is kept (the normalised value is recomputed from it).
 *
 * Numerics: per-channel sums are accumulated in double (PyTorch's channels-last statistics are float and were
 * measured 2e-4 relative from a float64 reference on a 16x32x320x320 tensor; these 2e-7). exp() is a polynomial
 * within 2e-7 relative of the correctly rounded value (for |SiLU| > 1e-30; below, about 0); a NaN propagates as in
 * PyTorch's kernels.
 *
 * Built by utils/native_build.py with -O3 -fno-trapping-math -fno-math-errno -fopenmp-simd (vectorised loops, no
 * change of rounding: no -ffast-math) and the instruction set PyTorch itself uses. Rows are split between
 * nthreads POSIX threads; every sum is combined in thread order, so results do not vary between runs. */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#define MAX_THREADS 256
#define FLUSH_ROWS 128 /* float partial sums go into the double ones every FLUSH_ROWS rows */

static inline float exp_poly(float x) {
    /* exp(x) = 2^k * e^r, |r| <= ln2/2; e^r by a degree-7 polynomial (Cephes' expf coefficients). */
    x = x < -87.3f ? -87.3f : x;
    x = x > 88.7f ? 88.7f : x;
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

/* ---- the passes, each over rows [r0, r1) ---- */

static void pass_stats(const float *restrict x, long r0, long r1, long C, double *restrict s, double *restrict q) {
    for (long r = r0; r < r1; r++) {
        const float *restrict xr = x + r * C;
        _Pragma("omp simd") for (long c = 0; c < C; c++) {
            double v = xr[c];
            s[c] += v;
            q[c] += v * v;
        }
    }
}

static void pass_forward(const float *restrict x, float *restrict out, long r0, long r1, long C,
                         const float *restrict scale, const float *restrict shift) {
    for (long r = r0; r < r1; r++) {
        const float *restrict xr = x + r * C;
        float *restrict o = out + r * C;
        _Pragma("omp simd") for (long c = 0; c < C; c++) {
            float y = xr[c] * scale[c] + shift[c];
            o[c] = y * sigmoid(y);
        }
    }
}

/* gy = dL/d(BatchNorm output) = g * silu'(y), written to gy; sums of gy and gy * (x - mean) per channel. */
static void pass_backward_sums(const float *restrict x, const float *restrict g, long gs, float *restrict gy,
                               long r0, long r1, long C, const float *restrict scale, const float *restrict shift,
                               const float *restrict mean, float *restrict fa, float *restrict fb,
                               double *restrict sa, double *restrict sb) {
    long rows = 0;
    for (long c = 0; c < C; c++) fa[c] = fb[c] = 0.0f;
    for (long r = r0; r < r1; r++) {
        const float *restrict xr = x + r * C;
        const float *restrict gr = g + r * gs;
        float *restrict o = gy + r * C;
        _Pragma("omp simd") for (long c = 0; c < C; c++) {
            float y = xr[c] * scale[c] + shift[c];
            float s = sigmoid(y);
            float d = gr[c] * s * (1.0f + y * (1.0f - s));
            o[c] = d;
            fa[c] += d;
            fb[c] += d * (xr[c] - mean[c]);
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
static void pass_backward_input(const float *restrict x, float *restrict gy, long r0, long r1, long C,
                                const float *restrict k0, const float *restrict k1, const float *restrict k2,
                                const float *restrict mean) {
    for (long r = r0; r < r1; r++) {
        const float *restrict xr = x + r * C;
        float *restrict o = gy + r * C;
        _Pragma("omp simd") for (long c = 0; c < C; c++) o[c] = k1[c] * o[c] - k2[c] * (xr[c] - mean[c]) - k0[c];
    }
}

/* ---- threads ---- */

enum { STATS, FORWARD, BACKWARD_SUMS, BACKWARD_INPUT };

typedef struct {
    int pass;
    long r0, r1, C, gs;
    const float *x, *g, *scale, *shift, *mean, *k0, *k1, *k2;
    float *out, *fa, *fb;
    double *sa, *sb;
} job_t;

static void *run_job(void *arg) {
    job_t *j = (job_t *)arg;
    switch (j->pass) {
    case STATS: pass_stats(j->x, j->r0, j->r1, j->C, j->sa, j->sb); break;
    case FORWARD: pass_forward(j->x, j->out, j->r0, j->r1, j->C, j->scale, j->shift); break;
    case BACKWARD_SUMS:
        pass_backward_sums(j->x, j->g, j->gs, j->out, j->r0, j->r1, j->C, j->scale, j->shift, j->mean, j->fa,
                           j->fb, j->sa, j->sb);
        break;
    default: pass_backward_input(j->x, j->out, j->r0, j->r1, j->C, j->k0, j->k1, j->k2, j->mean);
    }
    return 0;
}

/* Runs jobs[0..n) on n threads (this one included). Returns 0, or -1 when a thread could not start (then that
 * job runs on this thread: the results are the same, only slower). */
static int run_jobs(job_t *jobs, int n) {
    pthread_t th[MAX_THREADS];
    int started[MAX_THREADS] = {0}, rc = 0;
    for (int t = 1; t < n; t++) started[t] = pthread_create(&th[t], 0, run_job, &jobs[t]) == 0;
    run_job(&jobs[0]);
    for (int t = 1; t < n; t++) {
        if (started[t]) pthread_join(th[t], 0);
        else { run_job(&jobs[t]); rc = -1; }
    }
    return rc;
}

static int clamp_threads(int n, long R) {
    if (n > MAX_THREADS) n = MAX_THREADS;
    if (n > R) n = (int)R;
    return n < 1 ? 1 : n;
}

static void split(job_t *jobs, int n, long R) {
    for (int t = 0; t < n; t++) {
        jobs[t].r0 = R * t / n;
        jobs[t].r1 = R * (t + 1) / n;
    }
}

/* Forward. stats (out): 4*C floats, mean, invstd, scale = w*invstd, shift = b - mean*scale, for the backward.
 * running_mean/var are updated as torch.nn.BatchNorm2d does (momentum, unbiased variance). Returns 0, -2 when
 * memory ran out (nothing written), -3 for R < 2 (no variance; PyTorch raises there). */
int bn_silu_forward(const float *x, long R, long C, const float *w, const float *b, float *running_mean,
                    float *running_var, double momentum, double eps, float *out, float *stats, int nthreads) {
    if (R < 2) return -3;
    int n = clamp_threads(nthreads, R);
    double *acc = calloc((size_t)2 * n * C, sizeof(double));
    job_t *jobs = calloc((size_t)n, sizeof(job_t));
    if (!acc || !jobs) { free(acc); free(jobs); return -2; }
    split(jobs, n, R);
    for (int t = 0; t < n; t++) {
        jobs[t].pass = STATS; jobs[t].C = C; jobs[t].x = x;
        jobs[t].sa = acc + (size_t)2 * t * C; jobs[t].sb = jobs[t].sa + C;
    }
    run_jobs(jobs, n);
    float *mean = stats, *invstd = stats + C, *scale = stats + 2 * C, *shift = stats + 3 * C;
    for (long c = 0; c < C; c++) {
        double s = 0, q = 0;
        for (int t = 0; t < n; t++) { s += jobs[t].sa[c]; q += jobs[t].sb[c]; }
        double m = s / R, var = q / R - m * m;
        if (var < 0) var = 0;  /* rounding; a NaN stays NaN, as in PyTorch's statistics */
        double is = 1.0 / sqrt(var + eps);
        mean[c] = (float)m; invstd[c] = (float)is;
        scale[c] = (float)(w[c] * is); shift[c] = (float)(b[c] - m * w[c] * is);
        running_mean[c] = (float)((1.0 - momentum) * running_mean[c] + momentum * m);
        running_var[c] = (float)((1.0 - momentum) * running_var[c] + momentum * var * R / (R - 1));
    }
    for (int t = 0; t < n; t++) { jobs[t].pass = FORWARD; jobs[t].out = out; jobs[t].scale = scale; jobs[t].shift = shift; }
    run_jobs(jobs, n);
    free(acc); free(jobs);
    return 0;
}

/* Backward. g: dL/d(output), rows gs floats apart (gs >= C: a channel slice of a wider channels-last tensor).
 * Writes dx (R*C, dense; also the scratch for dL/d(BatchNorm output), so it is always needed), dw and db (C each).
 * want_dx 0 skips the input gradient's last pass. Returns 0, or -2 when memory ran out (nothing valid written). */
int bn_silu_backward(const float *x, long R, long C, const float *g, long gs, const float *w, const float *stats,
                     float *dx, float *dw, float *db, int want_dx, int nthreads) {
    int n = clamp_threads(nthreads, R);
    double *acc = calloc((size_t)2 * n * C, sizeof(double));
    float *part = malloc(sizeof(float) * 2 * n * C + sizeof(float) * 3 * C);
    job_t *jobs = calloc((size_t)n, sizeof(job_t));
    if (!acc || !part || !jobs) { free(acc); free(part); free(jobs); return -2; }
    const float *mean = stats, *invstd = stats + C, *scale = stats + 2 * C, *shift = stats + 3 * C;
    split(jobs, n, R);
    for (int t = 0; t < n; t++) {
        job_t *j = &jobs[t];
        j->pass = BACKWARD_SUMS; j->C = C; j->gs = gs; j->x = x; j->g = g; j->out = dx;
        j->scale = scale; j->shift = shift; j->mean = mean;
        j->fa = part + (size_t)2 * t * C; j->fb = j->fa + C;
        j->sa = acc + (size_t)2 * t * C; j->sb = j->sa + C;
    }
    run_jobs(jobs, n);
    float *k0 = part + (size_t)2 * n * C, *k1 = k0 + C, *k2 = k1 + C;
    for (long c = 0; c < C; c++) {
        double sum_gy = 0, sum_gyx = 0;
        for (int t = 0; t < n; t++) { sum_gy += jobs[t].sa[c]; sum_gyx += jobs[t].sb[c]; }
        double is = invstd[c];
        dw[c] = (float)(sum_gyx * is);
        db[c] = (float)sum_gy;
        k1[c] = (float)(w[c] * is);
        k0[c] = (float)(w[c] * is * sum_gy / R);
        k2[c] = (float)(w[c] * is * is * is * sum_gyx / R);
    }
    if (want_dx) {
        for (int t = 0; t < n; t++) { jobs[t].pass = BACKWARD_INPUT; jobs[t].k0 = k0; jobs[t].k1 = k1; jobs[t].k2 = k2; }
        run_jobs(jobs, n);
    }
    free(acc); free(part); free(jobs);
    return 0;
}
