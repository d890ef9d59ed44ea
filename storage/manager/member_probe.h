#pragma once
/* Checks a would-be pool member for existing content before a pool overwrites it. */
#include <jansson.h>
#include "storage/manager/storage.h"

#define MEMBER_FREE      0   /* nothing found: zeros, a sparse file, or a destroyed nasd pool */
#define MEMBER_HAS_DATA  1   /* a filesystem, partition table, exported pool or data: needs force */
#define MEMBER_LIVE      2   /* a member of a pool open here or by a live nasd: never overwritten */
#define MEMBER_UNUSABLE  3   /* cannot be read */

/* Appends {"path","kind","what"[,"import":pool]} findings to found; returns MEMBER_*. */
int member_probe(struct storage *st, const char *path, json_t *found);
/* Force: erases the signatures libblkid finds (as wipefs -a) and any nasd labels. */
int member_wipe(const char *path);
