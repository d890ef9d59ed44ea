/* Standalone NFS service harness for tests and benchmarks:
 *   nfs_serve --dir DIR --path /export --nfsport P --mountport M [--portmap PP]
 *             [--ro] [--clients CIDR,...] [--quota BYTES] [--state DIR]
 *             [--root-squash] [--all-squash] [--anonuid U] [--anongid G]
 *             [--workers N] [--bind ADDR] [--log LEVEL]
 *             [--max-conns N] [--max-conns-per-addr N] [--idle-timeout SECONDS]
 *   nfs_serve --engine DIR [--engine-size BYTES] [--lz4] [--root-mode OCTAL] ... (same options)
 *     serves a dataset on the pool engine instead of a host directory: a stripe pool
 *     on DIR/member.img holding an ext2 dataset volume (created on first use).
 * Prints "ready <nfsport> <mountport>" once serving; runs until SIGTERM/SIGINT.
 * Live reconfiguration for tests: SIGUSR1 cycles the export through read-only ->
 * only 10.0.0.0/8 allowed -> as configured; SIGUSR2 removes the export. */
#include "util/log.h"
#include "nfs/nfs.h"
#include "storage/pool/vpool.h"
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t stop, cycle, removal;
static void on_signal(int sig)
{
    if (sig == SIGUSR1) cycle++;
    else if (sig == SIGUSR2) removal = 1;
    else stop = 1;
}

/* A stripe pool on DIR/member.img with one dataset volume; created when missing. */
static struct nasd_fsroot *open_engine(const char *dir, uint64_t size, int lz4, uint64_t quota,
                                       struct vpool **vpp, int *err)
{
    char member[4096], msg[256];
    snprintf(member, sizeof member, "%s/member.img", dir);
    int fresh = access(member, F_OK) != 0;
    const char *paths[1] = { member };
    struct vpool_member_spec spec = { .path = member, .create_size = size };
    struct vpool *vp = NULL;
    int rc = fresh ? vpool_create("serve", VPOOL_STRIPE, &spec, 1, NULL, &vp, msg, sizeof msg)
                   : vpool_import(paths, 1, NULL, &vp, msg, sizeof msg);
    if (rc) { fprintf(stderr, "nfs_serve: engine pool: %s\n", msg); *err = rc; return NULL; }
    if (fresh) {
        struct vpool_status st;
        vpool_get_status(vp, &st);
        rc = vpool_vol_create(vp, "ds", st.size & ~((1ull << 20) - 1), VPOOL_VOL_THIN | (lz4 ? VPOOL_VOL_LZ4 : 0));
    }
    nasd_bdev *b = rc ? NULL : vpool_vol_open(vp, "ds", 4096, &rc);
    if (b && fresh) rc = nasd_ext2_format(b, "ds");
    struct nasd_fsroot *fs = b && !rc ? nasd_fsroot_open_ext2(b, "test/engine", 42, quota, &rc) : NULL;
    nasd_bdev_put(b);
    if (!fs) { vpool_close(vp); *err = rc; return NULL; }
    *vpp = vp;
    return fs;
}

static void usage(void)
{
    fprintf(stderr, "usage: nfs_serve --dir DIR --path /export --nfsport P --mountport M [--portmap PP]\n"
                    "       [--ro] [--clients CIDR,...] [--quota BYTES] [--state DIR] [--root-squash]\n"
                    "       [--all-squash] [--anonuid U] [--anongid G] [--workers N] [--bind ADDR] [--log LEVEL]\n"
                    "       [--max-conns N] [--max-conns-per-addr N] [--idle-timeout SECONDS]\n"
                    "   or: nfs_serve --engine DIR [--engine-size BYTES] [--lz4] [--root-mode OCTAL] ...\n");
    exit(2);
}

int main(int argc, char **argv)
{
    const char *dir = NULL, *engine = NULL, *path = "/export", *clients = NULL, *state = "", *bind = "127.0.0.1";
    int nfsport = 0, mountport = 0, pmport = -1, ro = 0, rsq = 0, asq = 0, workers = 0;
    unsigned long long quota = 0, engine_size = 1ull << 30;
    int lz4 = 0, root_mode = -1;
    unsigned anonuid = 65534, anongid = 65534;
    static const struct option opts[] = {
        { "dir", 1, 0, 'd' }, { "path", 1, 0, 'p' }, { "nfsport", 1, 0, 'n' }, { "mountport", 1, 0, 'm' },
        { "portmap", 1, 0, 'P' }, { "ro", 0, 0, 'r' }, { "clients", 1, 0, 'c' }, { "quota", 1, 0, 'q' },
        { "state", 1, 0, 's' }, { "root-squash", 0, 0, 'R' }, { "all-squash", 0, 0, 'A' },
        { "anonuid", 1, 0, 'u' }, { "anongid", 1, 0, 'g' }, { "workers", 1, 0, 'w' }, { "bind", 1, 0, 'b' },
        { "log", 1, 0, 'l' }, { "engine", 1, 0, 'E' }, { "engine-size", 1, 0, 'S' }, { "lz4", 0, 0, 'Z' },
        { "root-mode", 1, 0, 'M' }, { "max-conns", 1, 0, 'C' }, { "max-conns-per-addr", 1, 0, 'a' },
        { "idle-timeout", 1, 0, 'i' }, { 0, 0, 0, 0 } };
    unsigned max_conns = 0, max_per_addr = 0, idle_timeout = 0;
    int o;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case 'd': dir = optarg; break;
        case 'E': engine = optarg; break;
        case 'S': engine_size = strtoull(optarg, NULL, 0); break;
        case 'Z': lz4 = 1; break;
        case 'M': root_mode = (int)strtol(optarg, NULL, 8); break;
        case 'p': path = optarg; break;
        case 'n': nfsport = atoi(optarg); break;
        case 'm': mountport = atoi(optarg); break;
        case 'P': pmport = atoi(optarg); break;
        case 'r': ro = 1; break;
        case 'c': clients = optarg; break;
        case 'q': quota = strtoull(optarg, NULL, 0); break;
        case 's': state = optarg; break;
        case 'R': rsq = 1; break;
        case 'A': asq = 1; break;
        case 'u': anonuid = (unsigned)strtoul(optarg, NULL, 0); break;
        case 'g': anongid = (unsigned)strtoul(optarg, NULL, 0); break;
        case 'w': workers = atoi(optarg); break;
        case 'b': bind = optarg; break;
        case 'C': max_conns = (unsigned)strtoul(optarg, NULL, 0); break;
        case 'a': max_per_addr = (unsigned)strtoul(optarg, NULL, 0); break;
        case 'i': idle_timeout = (unsigned)strtoul(optarg, NULL, 0); break;
        case 'l': {
            int lv = nasd_log_level_parse(optarg);
            if (lv < 0) usage();
            nasd_log_level = lv;
            break;
        }
        default: usage();
        }
    }
    if (!dir == !engine) usage();
    int err = 0;
    struct vpool *vp = NULL;
    struct nasd_fsroot *fs = engine ? open_engine(engine, engine_size, lz4, quota, &vp, &err)
                                    : nasd_fsroot_open(dir, "test/export", 42, quota, &err);
    if (!fs) { fprintf(stderr, "nfs_serve: %s: %s\n", engine ? engine : dir, strerror(-err)); return 1; }
    if (root_mode >= 0 && (err = fs->vfs->chmod(fs, fs->root_fd, (mode_t)root_mode)) < 0) {
        fprintf(stderr, "nfs_serve: chmod of the root: %s\n", strerror(-err));
        return 1;
    }

    struct nfs_server_cfg scfg;
    memset(&scfg, 0, sizeof scfg);
    snprintf(scfg.bind_addr, sizeof scfg.bind_addr, "%s", bind);
    scfg.nfs_port = nfsport;
    scfg.mount_port = mountport;
    scfg.portmap_port = pmport;
    scfg.workers = workers;
    scfg.max_conns = max_conns;
    scfg.max_conns_per_addr = max_per_addr;
    scfg.idle_timeout_s = idle_timeout;
    snprintf(scfg.state_dir, sizeof scfg.state_dir, "%s", state);
    char emsg[256];
    struct nfs_server *srv = nfs_server_start(&scfg, emsg, sizeof emsg);
    if (!srv) { fprintf(stderr, "nfs_serve: %s\n", emsg); return 1; }

    struct nfs_export_cfg ecfg;
    memset(&ecfg, 0, sizeof ecfg);
    ecfg.export_id = 1;
    snprintf(ecfg.path, sizeof ecfg.path, "%s", path);
    ecfg.fs = fs;
    ecfg.read_only = ro;
    ecfg.root_squash = rsq;
    ecfg.all_squash = asq;
    ecfg.anonuid = anonuid;
    ecfg.anongid = anongid;
    ecfg.stats = nasd_stats_new();
    if (clients) {
        char *list = strdup(clients), *save = NULL;
        for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            if (ecfg.nnets >= NFS_MAX_CLIENT_NETS || nfs_parse_client_net(t, &ecfg.nets[ecfg.nnets])) {
                fprintf(stderr, "nfs_serve: bad client network '%s'\n", t);
                return 2;
            }
            ecfg.nnets++;
        }
        free(list);
    }
    int r = nfs_server_set_export(srv, &ecfg);
    if (r) { fprintf(stderr, "nfs_serve: export: %s\n", strerror(-r)); nfs_server_stop(srv); return 1; }

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGUSR2, &sa, NULL);
    printf("ready %d %d\n", nfs_server_nfs_port(srv), nfs_server_mount_port(srv));
    fflush(stdout);
    int handled = 0;
    struct nfs_export_cfg base = ecfg;
    while (!stop) {
        pause();
        while (handled != cycle) {
            handled++;
            struct nfs_export_cfg c = base;
            if (handled % 3 == 1) c.read_only = 1;
            if (handled % 3 == 2) { c.nnets = 1; nfs_parse_client_net("10.0.0.0/8", &c.nets[0]); }
            r = nfs_server_set_export(srv, &c);
            fprintf(stderr, "nfs_serve: export reconfigured (step %d): %s\n", handled % 3, r ? strerror(-r) : "ok");
        }
        if (removal) {
            removal = 0;
            r = nfs_server_remove_export(srv, 1);
            fprintf(stderr, "nfs_serve: export removed: %s\n", r ? strerror(-r) : "ok");
        }
    }

    struct nasd_io_stats *st = ecfg.stats;
    fprintf(stderr, "nfs_serve: stats read=%llu write=%llu other=%llu errors=%llu bytes_r=%llu bytes_w=%llu "
            "cpu_ms=%llu\n",
            (unsigned long long)st->ops[NASD_OP_READ], (unsigned long long)st->ops[NASD_OP_WRITE],
            (unsigned long long)st->ops[NASD_OP_OTHER], (unsigned long long)st->errors,
            (unsigned long long)st->bytes[NASD_OP_READ], (unsigned long long)st->bytes[NASD_OP_WRITE],
            (unsigned long long)(st->cpu_ns / 1000000));
    nfs_server_stop(srv);
    nasd_stats_put(ecfg.stats);
    nasd_fsroot_put(fs);
    if (vp) vpool_close(vp);
    return 0;
}
