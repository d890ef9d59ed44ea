#pragma once
/* API tokens: bearer tokens for /api/v1 and /metrics when auth is on. Only a SHA-256
 * of each token is stored; the token itself is shown once, at creation. */
#include "db/db.h"
#include <stddef.h>

#define API_TOKEN_HEX 64 /* 32 random bytes */

/* Create a token for user "admin" (created if missing). out gets the token text.
 * Returns its row id, or -1. */
int64_t auth_token_create(nasd_db *db, const char *description, char out[API_TOKEN_HEX + 1]);
/* Is this "Authorization" header value a valid "Bearer <token>"? */
int auth_check_header(nasd_db *db, const char *authorization);
int64_t auth_token_count(nasd_db *db);
