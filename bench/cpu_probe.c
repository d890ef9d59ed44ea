/* cpu_probe: how fast each CPU runs a fixed integer loop right now, in ms, one line
 * "cpuN MS" per online CPU (pinned there). The benchmarks print it next to their
 * results: on this VM one vCPU once ran the same loop 1.75x slower than the other
 * (equally fast minutes later; the host's other load, most likely), which moves a
 * latency row by as much as any code change.
 *   cpu_probe [MILLION_ITERATIONS, default 40] */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* a dependent multiply-add chain: ALU bound, no memory, so it shows the core's speed */
static double loop_ms(unsigned long n)
{
    volatile unsigned long x = 0;
    double t = now_ms();
    for (unsigned long i = 0; i < n; i++) x += i * i;
    return now_ms() - t;
}

int main(int argc, char **argv)
{
    unsigned long n = (argc > 1 ? strtoul(argv[1], NULL, 10) : 40) * 1000000ul;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    for (long c = 0; c < ncpu; c++) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(c, &set);
        if (sched_setaffinity(0, sizeof set, &set)) continue;   /* offline or not ours */
        double best = loop_ms(n);
        for (int r = 0; r < 2; r++) {   /* best of 3: an interrupt is not the core's speed */
            double t = loop_ms(n);
            if (t < best) best = t;
        }
        printf("cpu%ld %.1f\n", c, best);
    }
    return 0;
}
