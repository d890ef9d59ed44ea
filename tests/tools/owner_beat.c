/* owner_beat MEMBER...: plays a nasd on another host that has the pool open: writes the
 * members' owner sector ACTIVE with a fresh heartbeat every 300 ms until killed (set
 * NASD_HOSTID to a value other than the daemon's). Holds no flock, as a remote host would not. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
#include "storage/pool/vpool_owner.h"

int main(int argc, char **argv)
{
    if (argc < 2) { fprintf(stderr, "usage: owner_beat MEMBER...\n"); return 2; }
    int fds[16], n = 0;
    uint8_t uuid[16][16];
    for (int i = 1; i < argc && n < 16; i++) {
        struct vpool_peek pk;
        if (vpool_peek(argv[i], &pk) || !pk.has_label) { fprintf(stderr, "%s: no pool label\n", argv[i]); return 1; }
        for (int k = 0; k < 16; k++) uuid[n][k] = pk.uuid[k];
        if ((fds[n] = open(argv[i], O_RDWR)) < 0) { perror(argv[i]); return 1; }
        n++;
    }
    printf("beating\n");
    fflush(stdout);
    for (uint64_t seq = 1;; seq++) {
        for (int i = 0; i < n; i++) vpool_owner_write(fds[i], uuid[i], VPOOL_OWNER_ACTIVE, seq, 0);
        usleep(300000);
    }
}
