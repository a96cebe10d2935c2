/* What glibc's memcpy costs by size, on this machine or inside the emulated soft-RoCE guest:
 *   gcc -O2 -o target/memcpy-sizes benches/probe/memcpy_sizes.c
 *   target/memcpy-sizes && scripts/rxe-vm -- target/memcpy-sizes
 * Prints the mean time of one copy between two warm buffers, and the rate, for 1 KiB to
 * 256 KiB. Run it once more with
 *   GLIBC_TUNABLES=glibc.cpu.x86_rep_movsb_threshold=0x10000000
 * to see the copies glibc would otherwise make with `rep movsb` (from 8 KiB on, the threshold
 * it reports in `ld.so --list-diagnostics`) made by its vector loop instead. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec * 1e-3;
}

int main(void) {
    const size_t sizes[] = {1024, 2048, 4096, 8192, 16384, 32768, 65536, 262144};
    const size_t span = 1 << 20;
    char *src = aligned_alloc(4096, span), *dst = aligned_alloc(4096, span);
    if (!src || !dst) {
        fprintf(stderr, "memcpy-sizes: out of memory\n");
        return 1;
    }
    memset(src, 1, span);
    memset(dst, 2, span);
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        const int n = 500;
        memcpy(dst, src, sizes[k]); /* warm */
        double t0 = now_us();
        for (int i = 0; i < n; i++) {
            memcpy(dst, src, sizes[k]);
            __asm__ volatile("" : : "r"(dst) : "memory");
        }
        double per = (now_us() - t0) / n;
        printf("memcpy %7zu B: %8.2f us  (%6.0f MB/s)\n", sizes[k], per, sizes[k] / per);
    }
    free(src);
    free(dst);
    return 0;
}
