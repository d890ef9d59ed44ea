/* nasd: NAS appliance daemon entry point. */
#include "api/api.h"
#include "api/auth.h"
#include "api/monitoring.h"
#include "nasd/appliance/appliance.h"
#include "nasd/appliance/config.h"
#include "nasd/appliance/exposure.h"
#include "util/crash.h"
#include "util/log.h"
#include "nasd/appliance/monitor.h"
#include "selftest/selftest.h"
#include <getopt.h>
#include <signal.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f,
        "usage: nasd [--config FILE] [--listen HOST:PORT] [--db PATH] [--state-dir DIR] [--web-dir DIR]\n"
        "            [--iscsi-portal HOST:PORT|\"\"] [--nfs-bind ADDR|\"\"] [--nfs-port N] [--mount-port N]\n"
        "            [--portmap-port N|-1] [--demo] [--auth] [--log-level error|warn|info|debug]\n"
        "       nasd [--config FILE] [--db PATH] --create-token DESCRIPTION   (prints a new API token)\n");
}

/* Connections cost a descriptor each; the soft limit (often 1024) is far below what
 * the NFS, iSCSI and REST caps together allow, so take the hard limit. */
static void raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur >= rl.rlim_max) return;
    rlim_t was = rl.rlim_cur;
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) == 0)
        log_info("descriptor limit raised from %llu to %llu", (unsigned long long)was, (unsigned long long)rl.rlim_cur);
}

static void warn_line(void *arg, const char *msg) { log_warn("exposed: %s", msg); }

/* --create-token: works on the DB alone, with or without a running daemon (WAL). */
static int create_token(const struct nasd_config *cfg, const char *desc)
{
    nasd_db db;
    char err[512], tok[API_TOKEN_HEX + 1];
    if (db_open(&db, cfg->db_path, err, sizeof err)) {
        fprintf(stderr, "nasd: %s\n", err);
        return 1;
    }
    int64_t id = auth_token_create(&db, desc, tok);
    db_close(&db);
    if (id < 0) { fprintf(stderr, "nasd: cannot create a token\n"); return 1; }
    printf("%s\n", tok);
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        { "config", required_argument, 0, 'c' }, { "listen", required_argument, 0, 'l' },
        { "db", required_argument, 0, 'd' }, { "state-dir", required_argument, 0, 's' },
        { "web-dir", required_argument, 0, 'w' }, { "iscsi-portal", required_argument, 0, 'i' },
        { "nfs-bind", required_argument, 0, 'n' }, { "nfs-port", required_argument, 0, 'N' },
        { "mount-port", required_argument, 0, 'M' }, { "portmap-port", required_argument, 0, 'P' },
        { "demo", no_argument, 0, 'D' }, { "log-level", required_argument, 0, 'L' },
        { "auth", no_argument, 0, 'A' }, { "create-token", required_argument, 0, 'T' },
        { "help", no_argument, 0, 'h' }, { 0 },
    };
    static const char *keys[128] = { ['l'] = "listen", ['d'] = "db", ['s'] = "state_dir", ['w'] = "web_dir",
        ['i'] = "iscsi_portal", ['n'] = "nfs_bind", ['N'] = "nfs_port", ['M'] = "mount_port",
        ['P'] = "portmap_port", ['L'] = "log_level" };
    struct nasd_config cfg;
    char err[1024];
    const char *token_desc = NULL;
    config_defaults(&cfg);
    /* config file first, so flags override it wherever they appear */
    for (int i = 1; i < argc - 1; i++) {
        if (!strcmp(argv[i], "--config") && config_load_file(&cfg, argv[i + 1], err, sizeof err)) {
            fprintf(stderr, "nasd: %s\n", err);
            return 2;
        }
    }
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (c == 'c') continue;
        if (c == 'h') { usage(stdout); return 0; }
        if (c == 'D') { cfg.demo = 1; continue; }
        if (c == 'A') { cfg.auth = 1; continue; }
        if (c == 'T') { token_desc = optarg; continue; }
        if (c == '?' || c >= 128 || !keys[c]) { usage(stderr); return 2; }
        if (config_set(&cfg, keys[c], optarg, err, sizeof err)) {
            fprintf(stderr, "nasd: %s\n", err);
            return 2;
        }
    }
    if (optind < argc) { usage(stderr); return 2; }
    nasd_log_level = cfg.log_level;
    if (token_desc) return create_token(&cfg, token_desc);

    /* Signals are taken synchronously by the main thread; every other thread inherits the mask. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    crash_report_install();

    raise_nofile();
    static struct appliance app;
    if (appliance_start(&app, &cfg, err, sizeof err)) {
        log_err("start failed: %s", err);
        appliance_stop(&app);
        return 1;
    }
    char *lvl = db_setting_get(&app.db, "log_level");
    if (lvl && nasd_log_level_parse(lvl) >= 0) nasd_log_level = nasd_log_level_parse(lvl);
    free(lvl);
    if (cfg.demo && db_int(&app.db, 0, "SELECT count(*) FROM pools", "") == 0) {
        if (appliance_create_demo(&app, err, sizeof err)) log_err("demo pool: %s", err);
    }
    /* monitoring and self-tests are optional: the daemon serves without them */
    struct monitor *mon = monitor_start(&app, err, sizeof err);
    if (!mon) log_err("monitor: %s", err);
    struct selftest_mgr *tests = selftest_start(&app, err, sizeof err);
    if (!tests) log_err("self-tests: %s", err);
    api_stats_attach(mon);
    api_selftest_attach(&(struct api_selftest_backend){ tests, selftest_submit, selftest_job_json, selftest_jobs_json });
    api_register(&api_stats);
    api_register(&api_jobs);
    http_set_metrics(api_metrics_text);
    struct http_server *http = http_start(&app, err, sizeof err);
    if (!http) {
        log_err("%s", err);
        selftest_stop(tests);
        monitor_free(mon);
        appliance_stop(&app);
        return 1;
    }
    nasd_exposure_check(&cfg, &app.db, warn_line, NULL);
    if (cfg.auth && auth_token_count(&app.db) == 0)
        log_warn("auth is on but no API token exists: create one with nasd --db %s --create-token NAME", cfg.db_path);
    log_info("nasd ready: REST API and UI on http://%s/%s", cfg.listen, cfg.auth ? " (API tokens required)" : "");
    int sig = 0;
    while (sigwait(&set, &sig) == 0 && sig == SIGHUP)
        log_info("SIGHUP ignored (configuration lives in the database)");
    log_info("signal %d: shutting down", sig);
    http_stop(http);
    selftest_stop(tests);
    monitor_free(mon);
    appliance_stop(&app);
    log_info("stopped");
    return 0;
}
