/* Standalone harness: serves one file-backed target (optionally a second LUN and
 * CHAP) with the built-in iSCSI target until SIGTERM/SIGINT. Prints "ready PORT".
 * SIGUSR1 removes the target while running, SIGUSR2 adds it again. */
#include "iscsi/iscsi.h"
#include "util/log.h"
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint64_t parse_size(const char *s)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    switch (*end) {
    case 'k': case 'K': v <<= 10; break;
    case 'm': case 'M': v <<= 20; break;
    case 'g': case 'G': v <<= 30; break;
    case 't': case 'T': v <<= 40; break;
    }
    return v;
}

static void usage(void)
{
    fprintf(stderr, "usage: iscsi_serve --portal HOST:PORT --iqn IQN --file PATH [--size 1G] [--lun2 PATH2]\n"
                    "       [--chap user:secret] [--mutual user:secret] [--allow INITIATOR]... [--block 512|4096]\n"
                    "       [--workers N] [--log LEVEL] [--max-conns N] [--max-per-addr N] [--max-prelogin N] [--dout-timeout S]\n"
                    "       [--discovery-chap user:secret] [--immediate-data yes|no]\n");
    exit(2);
}

static void split_cred(const char *arg, char *user, char *secret)
{
    const char *c = strchr(arg, ':');
    if (!c || c == arg || (size_t)(c - arg) >= 64 || strlen(c + 1) >= 64) usage();
    memcpy(user, arg, c - arg);
    user[c - arg] = '\0';
    strcpy(secret, c + 1);
}

int main(int argc, char **argv)
{
    const char *portal = NULL, *iqn = NULL, *file = NULL, *file2 = NULL;
    uint64_t size = 0;
    uint32_t block = 512;
    int workers = 0;
    static struct iscsi_target_cfg cfg;
    struct iscsi_limits lim = { 1024, 64, 128, 30 };
    struct iscsi_chap disc = { 0 };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) usage();
        if (!strcmp(a, "--portal")) portal = v;
        else if (!strcmp(a, "--iqn")) iqn = v;
        else if (!strcmp(a, "--file")) file = v;
        else if (!strcmp(a, "--size")) size = parse_size(v);
        else if (!strcmp(a, "--lun2")) file2 = v;
        else if (!strcmp(a, "--chap")) split_cred(v, cfg.chap_user, cfg.chap_secret);
        else if (!strcmp(a, "--mutual")) split_cred(v, cfg.mutual_user, cfg.mutual_secret);
        else if (!strcmp(a, "--allow")) {
            if (cfg.ninitiators >= ISCSI_MAX_ACL || strlen(v) >= 224) usage();
            strcpy(cfg.initiators[cfg.ninitiators++], v);
        } else if (!strcmp(a, "--block")) block = (uint32_t)atoi(v);
        else if (!strcmp(a, "--workers")) workers = atoi(v);
        else if (!strcmp(a, "--log")) nasd_log_level = nasd_log_level_parse(v);
        else if (!strcmp(a, "--discovery-chap")) split_cred(v, disc.user, disc.secret);
        else if (!strcmp(a, "--max-conns")) lim.max_conns = (unsigned)atoi(v);
        else if (!strcmp(a, "--max-per-addr")) lim.max_per_addr = (unsigned)atoi(v);
        else if (!strcmp(a, "--max-prelogin")) lim.max_prelogin = (unsigned)atoi(v);
        else if (!strcmp(a, "--dout-timeout")) lim.dout_timeout_s = (unsigned)atoi(v);
        else if (!strcmp(a, "--immediate-data")) {
            if (strcmp(v, "yes") && strcmp(v, "no")) usage();
            cfg.immediate_data = !strcmp(v, "yes");
        }
        else usage();
        i++;
    }
    if (!portal || !iqn || !file || strlen(iqn) >= sizeof cfg.iqn) usage();
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGUSR1);                   /* remove the target (live) */
    sigaddset(&set, SIGUSR2);                   /* add it back */
    pthread_sigmask(SIG_BLOCK, &set, NULL);     /* threads inherit: only sigwait sees them */
    signal(SIGPIPE, SIG_IGN);

    int err = 0;
    nasd_bdev *b = nasd_file_bdev_open(file, size, block, "test/lun0", &err);
    if (!b) { fprintf(stderr, "open %s: %s\n", file, strerror(-err)); return 1; }
    nasd_bdev *b2 = NULL;
    if (file2) {
        b2 = nasd_file_bdev_open(file2, size, block, "test/lun1", &err);
        if (!b2) { fprintf(stderr, "open %s: %s\n", file2, strerror(-err)); return 1; }
    }
    strcpy(cfg.iqn, iqn);
    snprintf(cfg.alias, sizeof cfg.alias, "iscsi_serve");
    cfg.luns[cfg.nluns++] = (struct iscsi_lun_cfg){ .lun = 0, .bdev = b };
    if (b2) cfg.luns[cfg.nluns++] = (struct iscsi_lun_cfg){ .lun = 1, .bdev = b2 };
    cfg.stats = nasd_stats_new();

    char msg[256];
    struct iscsi_server *s = iscsi_server_start(portal, workers, msg, sizeof msg);
    if (!s) { fprintf(stderr, "%s\n", msg); return 1; }
    iscsi_server_set_limits(s, &lim);
    if (disc.user[0]) iscsi_server_set_discovery_auth(s, &disc);
    int r = iscsi_server_set_target(s, &cfg);
    if (r) { fprintf(stderr, "set_target: %s\n", strerror(-r)); iscsi_server_stop(s); return 1; }
    printf("ready port %d\n", iscsi_server_port(s));
    fflush(stdout);
    int sig;
    for (;;) {
        sigwait(&set, &sig);
        if (sig == SIGUSR1) fprintf(stderr, "iscsi_serve: remove_target -> %d\n", iscsi_server_remove_target(s, cfg.iqn));
        else if (sig == SIGUSR2) fprintf(stderr, "iscsi_serve: set_target -> %d\n", iscsi_server_set_target(s, &cfg));
        else break;
    }
    iscsi_server_stop(s);
    nasd_bdev_put(b);
    nasd_bdev_put(b2);
    struct nasd_io_stats *st = cfg.stats;
    fprintf(stderr, "iscsi_serve: stats read %llu ops %llu bytes, write %llu ops %llu bytes, other %llu, errors %llu, cpu %.3f s\n",
            (unsigned long long)st->ops[NASD_OP_READ], (unsigned long long)st->bytes[NASD_OP_READ],
            (unsigned long long)st->ops[NASD_OP_WRITE], (unsigned long long)st->bytes[NASD_OP_WRITE],
            (unsigned long long)st->ops[NASD_OP_OTHER], (unsigned long long)st->errors, st->cpu_ns / 1e9);
    nasd_stats_put(st);
    return 0;
}
