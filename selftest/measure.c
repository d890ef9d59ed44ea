/* Self-test measurement: op accounting, per-second timeline, progress. */
#define _GNU_SOURCE
#include "selftest/engine.h"
#include "util/stats.h"
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void st_set_progress(struct st_run *r, double p)
{
    if (p < 0) p = 0;
    if (p > 1) p = 1;
    pthread_mutex_lock(r->lock);
    if (p > *r->progress) *r->progress = p;
    pthread_mutex_unlock(r->lock);
}

int st_cancelled(struct st_run *r) { return atomic_load(r->cancel) != 0; }

void st_note_bad(struct st_run *r, const char *fmt, ...)
{
    r->bad++;
    if (r->first_bad[0]) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->first_bad, sizeof r->first_bad, fmt, ap);
    va_end(ap);
}

static const char *const err_names[] = { "NOSPC", "QUOTA", "EIO", "TIMEOUT", "LOGIN", "CONNECTION", "ERROR" };

const char *st_err_name(int kind) { return kind >= 0 && kind <= ST_ERR_OTHER ? err_names[kind] : NULL; }

int st_err_kind(int status, const char *msg)
{
    msg = msg ? msg : "";
    /* libnfs reports NFS3ERR_* in the message with an errno that is not always the same */
    if (status == -EDQUOT || strstr(msg, "DQUOT")) return ST_ERR_QUOTA;
    if (status == -ENOSPC || strstr(msg, "NOSPC") || strstr(msg, "SPACE ALLOCATION FAILED")) return ST_ERR_NOSPC;
    if (status == -ETIMEDOUT || strcasestr(msg, "timeout") || strcasestr(msg, "timed out")) return ST_ERR_TIMEOUT;
    if (strcasestr(msg, "login")) return ST_ERR_LOGIN;
    if (status == -ECONNRESET || status == -EPIPE || strcasestr(msg, "connection")) return ST_ERR_CONNECTION;
    if (status == -EIO || strstr(msg, "NFS3ERR_IO") || strstr(msg, "MEDIUM ERROR")) return ST_ERR_EIO;
    return ST_ERR_OTHER;
}

void st_note_error(struct st_run *r, int status, const char *msg)
{
    r->err_kind[st_err_kind(status, msg)]++;
    if (!r->first_error[0])
        snprintf(r->first_error, sizeof r->first_error, "%s", msg && *msg ? msg : strerror(status < 0 ? -status : EIO));
}

int st_main_cause(const struct st_run *r)
{
    int best = -1;
    for (int k = 0; k <= ST_ERR_OTHER; k++)
        if (r->err_kind[k] && (best < 0 || r->err_kind[k] > r->err_kind[best])) best = k;
    return best;
}

void st_measure_start(struct st_run *r)
{
    st_lat_reset(&r->lat);
    r->ops = r->bytes = 0;
    r->run_start_ns = nasd_now_ns();
    r->run_end_ns = 0;
    r->tl_next_ns = r->run_start_ns + 1000000000ull;
    r->tl_ops = r->tl_bytes = 0;
    r->tl_sec = 0;
}

void st_measure_op(struct st_run *r, uint64_t lat_ns, uint64_t bytes, int ok)
{
    if (!ok) { r->errors++; return; }
    st_lat_add(&r->lat, lat_ns);
    r->ops++;
    r->bytes += bytes;
    r->tl_ops++;
    r->tl_bytes += bytes;
}

static void timeline_push(struct st_run *r, double t, double secs)
{
    json_t *e = json_pack("{s:f, s:f, s:f}", "t", t, "iops", (double)r->tl_ops / secs,
                          "mbps", (double)r->tl_bytes / 1e6 / secs);
    pthread_mutex_lock(r->lock);
    json_array_append_new(r->timeline, e);
    pthread_mutex_unlock(r->lock);
    r->tl_ops = r->tl_bytes = 0;
}

void st_measure_tick(struct st_run *r, uint64_t now)
{
    while (now >= r->tl_next_ns) {
        /* a slow second (stall) shows as its own entry, not averaged away */
        timeline_push(r, ++r->tl_sec, 1.0);
        r->tl_next_ns += 1000000000ull;
    }
    double elapsed = (double)(now - r->run_start_ns) / 1e9;
    st_set_progress(r, 0.1 + 0.8 * (elapsed / r->seconds > 1 ? 1 : elapsed / r->seconds));
}

void st_measure_end(struct st_run *r)
{
    uint64_t now = nasd_now_ns();
    st_measure_tick(r, now);
    double part = (double)(now - (r->tl_next_ns - 1000000000ull)) / 1e9;
    if (part >= 0.05 && (r->tl_ops || r->tl_bytes)) timeline_push(r, r->tl_sec + part, part);
    r->run_end_ns = now;
    st_set_progress(r, 0.9);
}
