#pragma once
/* Shared flow for export create/patch: the DB change and the live apply succeed or
 * fail together. */
#include "api/api.h"

/* Run after the rows are written inside an open transaction: applies the export;
 * commits on success, otherwise rolls back, re-applies the previous state (if
 * existed) and fills r with the error. Returns 0 on success. */
int export_commit_apply(struct appliance *a, enum export_type t, int64_t id, int existed, struct api_reply *r);
/* DELETE flow: stop serving, delete the row. */
void export_delete(struct appliance *a, enum export_type t, int64_t id, const char *table, struct api_reply *r);
/* Validate a JSON array of strings with a per-item checker; -1 fills r. */
int export_string_list(json_t *arr, const char *field, int max, int (*check)(const char *, char *, size_t),
                       struct api_reply *r);
/* JSON array of export_json(id) for every id the query returns. */
json_t *export_list(struct appliance *a, const char *ids_sql, json_t *(*export_json)(struct appliance *, int64_t));
