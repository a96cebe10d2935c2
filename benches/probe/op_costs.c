/* What a few basic operations cost on this machine, or inside the emulated soft-RoCE guest:
 *   gcc -O2 -o target/op-costs benches/probe/op_costs.c -lpthread
 *   target/op-costs && scripts/rxe-vm -- target/op-costs
 * Prints the mean cost of one `pause` instruction, one increment of a volatile counter, one
 * uncontended mutex lock + unlock, and one CLOCK_MONOTONIC read (a system call where the
 * clock source is an HPET, as in the guest). */
#include <pthread.h>
#include <stdio.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(void) {
    const int n = 200000, clock_n = 2000;
    volatile long counter = 0;
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    struct timespec ts;

    double t0 = now();
    for (int i = 0; i < n; i++) __builtin_ia32_pause();
    double t1 = now();
    for (int i = 0; i < n; i++) counter++;
    double t2 = now();
    for (int i = 0; i < n; i++) {
        pthread_mutex_lock(&m);
        pthread_mutex_unlock(&m);
    }
    double t3 = now();
    for (int i = 0; i < clock_n; i++) clock_gettime(CLOCK_MONOTONIC, &ts);
    double t4 = now();
    printf("pause %.1f ns, increment %.1f ns, mutex lock+unlock %.1f ns, clock_gettime %.1f ns\n",
           (t1 - t0) / n * 1e9, (t2 - t1) / n * 1e9, (t3 - t2) / n * 1e9,
           (t4 - t3) / clock_n * 1e9);
    return 0;
}
