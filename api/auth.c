/* API tokens and /api/v1/tokens. */
#include "api/auth.h"
#include "api/api.h"
#include "util/log.h"
#include <nettle/sha2.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>

static void hex(const uint8_t *in, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++) sprintf(out + 2 * i, "%02x", in[i]);
}

static void token_hash(const char *token, char out[2 * SHA256_DIGEST_SIZE + 1])
{
    struct sha256_ctx c;
    uint8_t d[SHA256_DIGEST_SIZE];
    sha256_init(&c);
    sha256_update(&c, strlen(token), (const uint8_t *)token);
    sha256_digest(&c, sizeof d, d);
    hex(d, sizeof d, out);
}

int64_t auth_token_create(nasd_db *db, const char *description, char out[API_TOKEN_HEX + 1])
{
    uint8_t raw[API_TOKEN_HEX / 2];
    if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw) return -1;
    hex(raw, sizeof raw, out);
    char h[2 * SHA256_DIGEST_SIZE + 1];
    token_hash(out, h);
    db_exec(db, NULL, "INSERT OR IGNORE INTO users(name, created) VALUES('admin', ?)", "i", (int64_t)time(NULL));
    int64_t uid = db_int(db, -1, "SELECT id FROM users WHERE name='admin'", "");
    int64_t id;
    if (uid < 0 || db_exec(db, &id, "INSERT INTO api_tokens(user_id, token_hash, description, created) VALUES(?,?,?,?)",
                           "issi", uid, h, description ? description : "", (int64_t)time(NULL)))
        return -1;
    return id;
}

int auth_check_header(nasd_db *db, const char *authorization)
{
    if (!authorization || strncasecmp(authorization, "Bearer ", 7)) return 0;
    const char *t = authorization + 7;
    while (*t == ' ') t++;
    if (strlen(t) != API_TOKEN_HEX) return 0;
    char h[2 * SHA256_DIGEST_SIZE + 1];
    token_hash(t, h);
    return db_int(db, -1, "SELECT id FROM api_tokens WHERE token_hash=?", "s", h) >= 0;
}

int64_t auth_token_count(nasd_db *db)
{
    return db_int(db, 0, "SELECT count(*) FROM api_tokens", "");
}

static void list(struct api_call *c, struct api_reply *r)
{
    api_ok(r, 200, db_rows(&c->app->db, "SELECT t.id, u.name AS user, t.description, t.created FROM api_tokens t "
                           "JOIN users u ON u.id=t.user_id ORDER BY t.id", ""));
}

static void create(struct api_call *c, struct api_reply *r)
{
    static const char *const allowed[] = { "description", NULL };
    const char *desc = "";
    if (api_body_object(c, r, allowed) || api_get_str(c, r, "description", 0, &desc)) return;
    if (strlen(desc) > 128) { api_error(r, 400, "invalid_field", "description longer than 128"); return; }
    char tok[API_TOKEN_HEX + 1];
    int64_t id = auth_token_create(&c->app->db, desc, tok);
    if (id < 0) { api_error(r, 500, "internal", "cannot create a token"); return; }
    char edesc[NASD_LOG_ESC_SIZE(128)];
    nasd_log_escape(desc, strlen(desc), edesc, sizeof edesc);
    log_info("API token %lld created (%s)", (long long)id, edesc);
    api_ok(r, 201, json_pack("{s:I, s:s, s:s}", "id", (json_int_t)id, "description", desc, "token", tok));
}

static void del(struct api_call *c, struct api_reply *r)
{
    int64_t id = api_lookup(c, r, "token", "SELECT id FROM api_tokens WHERE id=?", "SELECT id FROM api_tokens WHERE description=?");
    if (id < 0) return;
    db_exec(&c->app->db, NULL, "DELETE FROM api_tokens WHERE id=?", "i", id);
    log_info("API token %lld revoked", (long long)id);
    api_ok(r, 204, NULL);
}

const struct api_resource api_tokens = {
    .prefix = "tokens", .list = list, .create = create, .del = del,
};
