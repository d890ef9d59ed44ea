#pragma once
/* The storage manager tests' fixture: a scratch state directory, and a storage in it with
 * pool "tank" (a stripe over one 256 MiB member file). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "storage/manager/storage.h"

static char dir[256];

static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/nasd-storage-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) {}
}

static struct storage *with_pool(void)
{
    struct storage *st = storage_new(dir, 0, 0);
    struct storage_member m = { .size = 256ull << 20, .create = 1 };
    snprintf(m.path, sizeof m.path, "%s/m0.img", dir);
    char err[256] = "";
    ck_assert_msg(storage_pool_create(st, "tank", "stripe", &m, 1, err, sizeof err) == 0, "%s", err);
    return st;
}
