/* Engine dataset backend (storage/vfs_ext2*.c): POSIX semantics of every vfs op on an ext2
 * filesystem in a file bdev (files, sparse/large offsets, truncate, directories, every rename
 * case, links, symlinks, device nodes, readdir cookies, handles, attributes) and permission
 * checks for non-root credentials. Each test ends with e2fsck of the image.
 * Durability, crashes and the pool engine: test_vfs_ext2_durability.c. */
#define _GNU_SOURCE
#include "tests/unit/vfs_ext2_test_util.h"
#include <sys/sysmacros.h>
#include "util/log.h"


START_TEST(format_and_open)
{
    struct nasd_fsroot *f = fresh_fs();
    ck_assert_int_eq(R(f), 2);
    ck_assert_str_eq(f->path, "engine:tank/ds");
    struct stat st = st_of(f, R(f), "");
    ck_assert_uint_eq(st.st_mode, S_IFDIR | 0755);
    ck_assert_uint_eq(st.st_uid, 0);
    ck_assert_uint_eq(st.st_nlink, 2);
    ck_assert_uint_eq(st.st_blksize, 4096);
    struct statvfs sv;
    ck_assert_int_eq(V(f)->statvfs(f, &sv), 0);
    ck_assert_uint_eq(sv.f_bsize, 4096);
    ck_assert_uint_gt(sv.f_blocks, 100000);
    ck_assert_uint_gt(sv.f_bfree, sv.f_blocks * 9 / 10);
    ck_assert_uint_ge(sv.f_files, (DEV_SIZE - TXB_JOURNAL_BYTES) / 65536 - 64);
    struct names c = { 0 };
    ck_assert_int_eq(V(f)->readdir(f, R(f), 0, collect, &c), 0);
    ck_assert_int_eq(c.n, 2);
    ck_assert_str_eq(c.v[0], ".");
    ck_assert_str_eq(c.v[1], "..");
    ck_assert_int_eq(c.type[0], DT_DIR);
    names_free(&c);
    nasd_fsroot_put(f);
    ck_assert_int_eq(fsck(devpath), 0);
    /* a thin format: only metadata was written */
    struct stat fst;
    ck_assert_int_eq(stat(devpath, &fst), 0);
    printf("format of %llu MiB: %llu KiB allocated in the backing file\n",
           (unsigned long long)(DEV_SIZE >> 20), (unsigned long long)fst.st_blocks / 2);
    ck_assert_uint_lt((uint64_t)fst.st_blocks * 512, 4ull << 20);
}
END_TEST

START_TEST(file_read_write)
{
    struct nasd_fsroot *f = fresh_fs();
    int fd = creat_file(f, R(f), "a");
    ck_assert_int_gt(fd, 2);
    ck_assert_int_eq(creat_file(f, R(f), "a"), -EEXIST);
    ck_assert_int_eq(V(f)->pwrite(f, fd, "hello", 5, 0), 5);
    char buf[64] = "";
    ck_assert_int_eq(V(f)->pread(f, fd, buf, sizeof buf, 0), 5);
    ck_assert(!memcmp(buf, "hello", 5));
    ck_assert_int_eq(V(f)->pread(f, fd, buf, sizeof buf, 5), 0);
    ck_assert_int_eq(V(f)->pread(f, fd, buf, 3, 2), 3);
    ck_assert(!memcmp(buf, "llo", 3));

    /* 3 MiB + 100 bytes at an unaligned offset, read back in odd pieces */
    size_t n = (3u << 20) + 100;
    uint8_t *data = malloc(n), *back = malloc(n);
    fill(data, n, 1);
    int big = creat_file(f, R(f), "big");
    ck_assert_int_eq(V(f)->pwrite(f, big, data, n, 777), (ssize_t)n);
    struct stat st = st_of(f, R(f), "big");
    ck_assert_int_eq(st.st_size, (off_t)(n + 777));
    ck_assert_int_ge(st.st_blocks, (blkcnt_t)(n / 512));
    memset(back, 0xaa, n);
    ck_assert_int_eq(V(f)->pread(f, big, back, 777, 0), 777);
    for (int i = 0; i < 777; i++) ck_assert_int_eq(back[i], 0);
    for (size_t off = 0; off < n;) {
        size_t k = 12345 + off % 70000;
        if (k > n - off) k = n - off;
        ck_assert_int_eq(V(f)->pread(f, big, back + off, k, 777 + off), (ssize_t)k);
        off += k;
    }
    ck_assert(!memcmp(data, back, n));

    /* sparse: a block far away; the hole reads zeros and takes no space */
    int sp = creat_file(f, R(f), "sparse");
    uint64_t far = 300ull << 20;
    ck_assert_int_eq(V(f)->pwrite(f, sp, "end", 3, far), 3);
    st = st_of(f, R(f), "sparse");
    ck_assert_int_eq(st.st_size, (off_t)(far + 3));
    ck_assert_int_le(st.st_blocks, 16);
    memset(back, 0xaa, 1 << 20);
    ck_assert_int_eq(V(f)->pread(f, sp, back, 1 << 20, far - (1 << 20) + 3), 1 << 20);
    for (size_t i = 0; i < (1u << 20) - 3; i++) ck_assert_int_eq(back[i], 0);
    ck_assert(!memcmp(back + (1 << 20) - 3, "end", 3));
    /* large offsets beyond the volume size are fine in a sparse file */
    uint64_t huge = 1ull << 40;
    ck_assert_int_eq(V(f)->pwrite(f, sp, "x", 1, huge), 1);
    ck_assert_int_eq(V(f)->pread(f, sp, buf, 10, huge), 1);
    ck_assert_int_eq(buf[0], 'x');

    /* mtime/ctime move on write, with nanoseconds */
    struct stat s1 = st_of(f, R(f), "a");
    usleep(20000);
    ck_assert_int_eq(V(f)->pwrite(f, fd, "!", 1, 100), 1);
    struct stat s2 = st_of(f, R(f), "a");
    ck_assert_int_eq(s2.st_size, 101);
    ck_assert(s2.st_mtim.tv_sec > s1.st_mtim.tv_sec || s2.st_mtim.tv_nsec > s1.st_mtim.tv_nsec);
    ck_assert(s2.st_mtim.tv_nsec != 0 || s1.st_mtim.tv_nsec != 0);

    /* errors */
    ck_assert_int_eq(V(f)->pwrite(f, R(f), "x", 1, 0), -EISDIR);
    ck_assert_int_eq(V(f)->openat(f, R(f), "nope", O_RDONLY, 0), -ENOENT);
    ck_assert_int_eq(V(f)->openat(f, R(f), "a", O_RDONLY | O_DIRECTORY, 0), -ENOTDIR);
    ck_assert_int_eq(V(f)->openat(f, fd, "x", O_RDONLY, 0), -ENOTDIR);
    ck_assert_int_eq(V(f)->pread(f, 99999999, buf, 1, 0), -ESTALE);
    free(data);
    free(back);
    nasd_fsroot_put(f);
    ck_assert_int_eq(fsck(devpath), 0);
}
END_TEST

START_TEST(truncate_grow_shrink)
{
    struct nasd_fsroot *f = fresh_fs();
    int fd = creat_file(f, R(f), "t");
    size_t n = 2u << 20;
    uint8_t *data = malloc(n), *back = malloc(n);
    fill(data, n, 2);
    ck_assert_int_eq(V(f)->pwrite(f, fd, data, n, 0), (ssize_t)n);
    struct statvfs a, b, c;
    ck_assert_int_eq(V(f)->statvfs(f, &a), 0);
    ck_assert_int_eq(V(f)->truncate(f, fd, 5000), 0);
    ck_assert_int_eq(V(f)->statvfs(f, &b), 0);
    ck_assert_uint_ge(b.f_bfree, a.f_bfree + (n / 4096) - 3);
    struct stat st = st_of(f, R(f), "t");
    ck_assert_int_eq(st.st_size, 5000);
    ck_assert_int_eq(st.st_blocks, 16);
    /* grow again: the old bytes beyond 5000 must read as zeros */
    ck_assert_int_eq(V(f)->truncate(f, fd, 1u << 20), 0);
    ck_assert_int_eq(V(f)->statvfs(f, &c), 0);
    ck_assert_uint_eq(c.f_bfree, b.f_bfree);   /* grow is sparse */
    ck_assert_int_eq(V(f)->pread(f, fd, back, n, 0), 1 << 20);
    ck_assert(!memcmp(back, data, 5000));
    for (size_t i = 5000; i < (1u << 20); i++) ck_assert_msg(back[i] == 0, "byte %zu", i);
    ck_assert_int_eq(V(f)->truncate(f, R(f), 0), -EISDIR);
    /* O_TRUNC */
    ck_assert_int_eq(V(f)->openat(f, R(f), "t", O_RDWR | O_TRUNC, 0), fd);
    ck_assert_int_eq(st_of(f, R(f), "t").st_size, 0);
    ck_assert_int_eq(st_of(f, R(f), "t").st_blocks, 0);
    free(data);
    free(back);
    nasd_fsroot_put(f);
    ck_assert_int_eq(fsck(devpath), 0);
}
END_TEST

START_TEST(directories)
{
    struct nasd_fsroot *f = fresh_fs();
    ck_assert_int_eq(V(f)->mkdirat(f, R(f), "d", 0755), 0);
    ck_assert_int_eq(V(f)->mkdirat(f, R(f), "d", 0755), -EEXIST);
    ck_assert_uint_eq(st_of(f, R(f), "").st_nlink, 3);
    int d = V(f)->openat(f, R(f), "d", O_RDONLY | O_DIRECTORY, 0);
    ck_assert_int_gt(d, 2);
    struct stat st = st_of(f, R(f), "d");
    ck_assert_uint_eq(st.st_mode, S_IFDIR | 0755);
    ck_assert_uint_eq(st.st_nlink, 2);
    ck_assert_int_eq(st.st_size, 4096);
    ck_assert_int_eq(lookup_ino(f, d, ".."), R(f));
    ck_assert_int_eq(lookup_ino(f, d, "."), d);
    ck_assert_int_eq(V(f)->mkdirat(f, d, "sub", 0700), 0);
    ck_assert_uint_eq(st_of(f, d, "").st_nlink, 3);
    ck_assert_int_gt(creat_file(f, d, "file"), 0);
    ck_assert_int_eq(V(f)->unlinkat(f, R(f), "d", AT_REMOVEDIR), -ENOTEMPTY);
    ck_assert_int_eq(V(f)->unlinkat(f, R(f), "d", 0), -EISDIR);
    ck_assert_int_eq(V(f)->unlinkat(f, d, "file", AT_REMOVEDIR), -ENOTDIR);
    ck_assert_int_eq(V(f)->unlinkat(f, d, "file", 0), 0);
    ck_assert_int_eq(V(f)->unlinkat(f, d, "file", 0), -ENOENT);
    ck_assert_int_eq(V(f)->unlinkat(f, d, "sub", AT_REMOVEDIR), 0);
    ck_assert_uint_eq(st_of(f, d, "").st_nlink, 2);
    ck_assert_int_eq(V(f)->unlinkat(f, R(f), "d", AT_REMOVEDIR), 0);
    ck_assert_uint_eq(st_of(f, R(f), "").st_nlink, 2);
    ck_assert_int_eq(V(f)->fstatat(f, d, "", &st, AT_EMPTY_PATH), -ESTALE);
    ck_assert_int_eq(V(f)->unlinkat(f, R(f), ".", AT_REMOVEDIR), -EINVAL);
    ck_assert_int_eq(V(f)->unlinkat(f, R(f), "..", AT_REMOVEDIR), -ENOTEMPTY);
    /* names */
    ck_assert_int_eq(V(f)->mkdirat(f, R(f), "", 0755), -ENOENT);
    ck_assert_int_eq(V(f)->mkdirat(f, R(f), ".", 0755), -EEXIST);
    ck_assert_int_eq(V(f)->mkdirat(f, R(f), "..", 0755), -EEXIST);
    ck_assert_int_eq(V(f)->mkdirat(f, R(f), "a/b", 0755), -EINVAL);
    char longname[300];
    memset(longname, 'n', sizeof longname);
    longname[256] = 0;
    ck_assert_int_eq(V(f)->mkdirat(f, R(f), longname, 0755), -ENAMETOOLONG);
    longname[255] = 0;
    ck_assert_int_eq(V(f)->mkdirat(f, R(f), longname, 0755), 0);
    ck_assert_int_gt(lookup_ino(f, R(f), longname), 0);
    /* many subdirectories: the parent grows past one block */
    for (int i = 0; i < 300; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "dir-with-a-long-name-%04d", i);
        ck_assert_int_eq(V(f)->mkdirat(f, R(f), nm, 0755), 0);
    }
    ck_assert_uint_eq(st_of(f, R(f), "").st_nlink, 303);
    ck_assert_int_gt(st_of(f, R(f), "").st_size, 4096);
    nasd_fsroot_put(f);
    ck_assert_int_eq(fsck(devpath), 0);
}
END_TEST

START_TEST(renames)
{
    struct nasd_fsroot *f = fresh_fs();
    int r = R(f);
    int a = creat_file(f, r, "a"), b = creat_file(f, r, "b");
    ck_assert_int_eq(V(f)->pwrite(f, a, "AAAA", 4, 0), 4);
    ck_assert_int_eq(V(f)->pwrite(f, b, "BBBBBBBB", 8, 0), 8);
    struct nasd_fh hb;
    ck_assert_int_eq(V(f)->handle(f, r, "b", 0, &hb), 0);
    /* file over file: b's inode goes away */
    ck_assert_int_eq(V(f)->renameat(f, r, "a", r, "b"), 0);
    ck_assert_int_eq(lookup_ino(f, r, "a"), -ENOENT);
    ck_assert_int_eq(lookup_ino(f, r, "b"), a);
    ck_assert_int_eq(V(f)->open_handle(f, &hb, O_RDONLY), -ESTALE);
    char buf[16];
    ck_assert_int_eq(V(f)->pread(f, a, buf, 16, 0), 4);

    ck_assert_int_eq(V(f)->mkdirat(f, r, "d1", 0755), 0);
    ck_assert_int_eq(V(f)->mkdirat(f, r, "d2", 0755), 0);
    ck_assert_int_eq(V(f)->mkdirat(f, r, "full", 0755), 0);
    int d1 = lookup_ino(f, r, "d1"), d2 = lookup_ino(f, r, "d2"), full = lookup_ino(f, r, "full");
    ck_assert_int_gt(creat_file(f, full, "x"), 0);
    ck_assert_uint_eq(st_of(f, r, "").st_nlink, 5);
    /* dir over empty dir */
    ck_assert_int_eq(V(f)->renameat(f, r, "d1", r, "d2"), 0);
    ck_assert_int_eq(lookup_ino(f, r, "d2"), d1);
    ck_assert_uint_eq(st_of(f, r, "").st_nlink, 4);
    ck_assert_int_eq(V(f)->fstatat(f, d2, "", &(struct stat){0}, AT_EMPTY_PATH), -ESTALE);
    /* dir over non-empty dir, file over dir, dir over file */
    ck_assert_int_eq(V(f)->renameat(f, r, "d2", r, "full"), -ENOTEMPTY);
    ck_assert_int_eq(V(f)->renameat(f, r, "b", r, "full"), -EISDIR);
    ck_assert_int_eq(V(f)->renameat(f, r, "d2", r, "b"), -ENOTDIR);
    /* into its own subtree */
    ck_assert_int_eq(V(f)->mkdirat(f, d1, "inner", 0755), 0);
    int inner = lookup_ino(f, d1, "inner");
    ck_assert_int_eq(V(f)->renameat(f, r, "d2", inner, "loop"), -EINVAL);
    ck_assert_int_eq(V(f)->renameat(f, r, "d2", d1, "self"), -EINVAL);
    /* across directories: ".." and link counts follow */
    ck_assert_uint_eq(st_of(f, d1, "").st_nlink, 3);
    ck_assert_uint_eq(st_of(f, full, "").st_nlink, 2);
    ck_assert_int_eq(V(f)->renameat(f, d1, "inner", full, "moved"), 0);
    ck_assert_int_eq(lookup_ino(f, inner, ".."), full);
    ck_assert_uint_eq(st_of(f, d1, "").st_nlink, 2);
    ck_assert_uint_eq(st_of(f, full, "").st_nlink, 3);
    ck_assert_int_eq(lookup_ino(f, full, "moved"), inner);
    ck_assert_int_eq(lookup_ino(f, d1, "inner"), -ENOENT);
    /* a file across directories, onto an existing name */
    int y = creat_file(f, d1, "y");
    ck_assert_int_eq(V(f)->renameat(f, d1, "y", full, "x"), 0);
    ck_assert_int_eq(lookup_ino(f, full, "x"), y);
    /* same inode (hard links): nothing happens */
    ck_assert_int_eq(V(f)->link(f, y, r, "y2"), 0);
    ck_assert_int_eq(V(f)->renameat(f, r, "y2", full, "x"), 0);
    ck_assert_int_eq(lookup_ino(f, r, "y2"), y);
    ck_assert_uint_eq(st_of(f, r, "y2").st_nlink, 2);
    /* same name in place; missing source; dots */
    ck_assert_int_eq(V(f)->renameat(f, r, "b", r, "b"), 0);
    ck_assert_int_eq(V(f)->renameat(f, r, "nope", r, "z"), -ENOENT);
    ck_assert_int_eq(V(f)->renameat(f, r, ".", r, "z"), -EBUSY);
    /* simple rename within a directory keeps content */
    ck_assert_int_eq(V(f)->renameat(f, r, "b", r, "c"), 0);
    ck_assert_int_eq(V(f)->pread(f, lookup_ino(f, r, "c"), buf, 16, 0), 4);
    nasd_fsroot_put(f);
    ck_assert_int_eq(fsck(devpath), 0);
}
END_TEST

START_TEST(links_symlinks_nodes)
{
    struct nasd_fsroot *f = fresh_fs();
    int r = R(f);
    int a = creat_file(f, r, "a");
    ck_assert_int_eq(V(f)->link(f, a, r, "a2"), 0);
    ck_assert_int_eq(V(f)->link(f, a, r, "a2"), -EEXIST);
    ck_assert_uint_eq(st_of(f, r, "a").st_nlink, 2);
    ck_assert_int_eq(V(f)->link(f, r, r, "rootlink"), -EPERM);
    ck_assert_int_eq(V(f)->unlinkat(f, r, "a", 0), 0);
    ck_assert_uint_eq(st_of(f, r, "a2").st_nlink, 1);
    ck_assert_int_eq(V(f)->pwrite(f, a, "still", 5, 0), 5);
    ck_assert_int_eq(V(f)->unlinkat(f, r, "a2", 0), 0);
    ck_assert_int_eq(V(f)->pwrite(f, a, "gone", 4, 0), -ESTALE);

    /* symlinks: fast (inline) and slow (a block) */
    char buf[5000];
    ck_assert_int_eq(V(f)->symlinkat(f, "short/target", r, "s"), 0);
    int s = lookup_ino(f, r, "s");
    struct stat st = st_of(f, r, "s");
    ck_assert(S_ISLNK(st.st_mode));
    ck_assert_int_eq(st.st_size, 12);
    ck_assert_int_eq(st.st_blocks, 0);
    ck_assert_int_eq(V(f)->readlink(f, s, buf, sizeof buf), 12);
    ck_assert(!memcmp(buf, "short/target", 12));
    char lt[1001];
    for (int i = 0; i < 1000; i++) lt[i] = (char)('a' + i % 26);
    lt[1000] = 0;
    ck_assert_int_eq(V(f)->symlinkat(f, lt, r, "l"), 0);
    int l = lookup_ino(f, r, "l");
    st = st_of(f, r, "l");
    ck_assert_int_eq(st.st_size, 1000);
    ck_assert_int_eq(st.st_blocks, 8);
    ck_assert_int_eq(V(f)->readlink(f, l, buf, sizeof buf), 1000);
    ck_assert(!memcmp(buf, lt, 1000));
    ck_assert_int_eq(V(f)->readlink(f, l, buf, 10), 10);
    ck_assert_int_eq(V(f)->readlink(f, r, buf, 10), -EINVAL);
    ck_assert_int_eq(V(f)->openat(f, r, "s", O_RDONLY, 0), -ELOOP);
    ck_assert_int_eq(V(f)->openat(f, r, "s", O_PATH | O_NOFOLLOW, 0), s);
    ck_assert_int_eq(V(f)->symlinkat(f, "", r, "e"), -ENOENT);
    char toolong[4200];
    memset(toolong, 'x', sizeof toolong);
    toolong[4096] = 0;
    ck_assert_int_eq(V(f)->symlinkat(f, toolong, r, "e"), -ENAMETOOLONG);
    toolong[4095] = 0;
    ck_assert_int_eq(V(f)->symlinkat(f, toolong, r, "max"), 0);
    ck_assert_int_eq(V(f)->readlink(f, lookup_ino(f, r, "max"), buf, sizeof buf), 4095);
    ck_assert_int_eq(V(f)->unlinkat(f, r, "l", 0), 0);

    /* device nodes and fifos */
    ck_assert_int_eq(V(f)->mknodat(f, r, "fifo", S_IFIFO | 0640, 0), 0);
    st = st_of(f, r, "fifo");
    ck_assert_uint_eq(st.st_mode, S_IFIFO | 0640);
    ck_assert_int_eq(V(f)->mknodat(f, r, "tty", S_IFCHR | 0600, makedev(4, 64)), 0);
    ck_assert(st_of(f, r, "tty").st_rdev == makedev(4, 64));
    ck_assert_int_eq(V(f)->mknodat(f, r, "bigdev", S_IFBLK | 0600, makedev(300, 70000)), 0);
    st = st_of(f, r, "bigdev");
    ck_assert(S_ISBLK(st.st_mode));
    ck_assert(st.st_rdev == makedev(300, 70000));
    ck_assert_int_eq(V(f)->mknodat(f, r, "sock", S_IFSOCK | 0600, 0), 0);
    ck_assert_int_eq(V(f)->mknodat(f, r, "fifo", S_IFIFO | 0600, 0), -EEXIST);
    struct names c = { 0 };
    ck_assert_int_eq(V(f)->readdir(f, r, 0, collect, &c), 0);
    ck_assert_int_eq(c.type[find_name(&c, "fifo")], DT_FIFO);
    ck_assert_int_eq(c.type[find_name(&c, "tty")], DT_CHR);
    ck_assert_int_eq(c.type[find_name(&c, "bigdev")], DT_BLK);
    ck_assert_int_eq(c.type[find_name(&c, "sock")], DT_SOCK);
    ck_assert_int_eq(c.type[find_name(&c, "s")], DT_LNK);
    names_free(&c);
    nasd_fsroot_put(f);
    ck_assert_int_eq(fsck(devpath), 0);
}
END_TEST

START_TEST(readdir_2000_resume)
{
    struct nasd_fsroot *f = fresh_fs();
    int r = R(f);
    ck_assert_int_eq(V(f)->mkdirat(f, r, "big", 0755), 0);
    int d = lookup_ino(f, r, "big");
    enum { N = 2000 };
    for (int i = 0; i < N; i++) {
        char nm[64];
        snprintf(nm, sizeof nm, "entry-%d-%s", i, i % 7 ? "f" : "a-somewhat-longer-name-for-variety");
        if (i % 10 == 0) ck_assert_int_eq(V(f)->mkdirat(f, d, nm, 0755), 0);
        else ck_assert_int_gt(creat_file(f, d, nm), 0);
    }
    /* delete some so the directory has holes, then refill a few */
    for (int i = 5; i < N; i += 50) {
        char nm[64];
        snprintf(nm, sizeof nm, "entry-%d-%s", i, i % 7 ? "f" : "a-somewhat-longer-name-for-variety");
        ck_assert_int_eq(V(f)->unlinkat(f, d, nm, 0), 0);
    }
    struct names all = { 0 };
    ck_assert_int_eq(V(f)->readdir(f, d, 0, collect, &all), 0);
    ck_assert_int_eq(all.n, N - N / 50 + 2);
    ck_assert_str_eq(all.v[0], ".");
    ck_assert_str_eq(all.v[1], "..");
    for (int i = 0; i < all.n; i++) ck_assert_int_eq(find_name(&all, all.v[i]), i);   /* unique */
    for (int i = 2; i < all.n; i++) {
        int k = atoi(all.v[i] + 6);
        ck_assert_int_eq(all.type[i], k % 10 == 0 ? DT_DIR : DT_REG);
    }
    /* resuming from every 100th cookie yields exactly the remaining entries */
    for (int i = 0; i < all.n; i += 100) {
        struct names rest = { 0 };
        ck_assert_int_eq(V(f)->readdir(f, d, all.cookie[i], collect, &rest), 0);
        ck_assert_int_eq(rest.n, all.n - i - 1);
        for (int j = 0; j < rest.n; j++) ck_assert_str_eq(rest.v[j], all.v[i + 1 + j]);
        names_free(&rest);
    }
    /* paging in pieces of 100 gives every name exactly once */
    struct names paged = { 0 };
    uint64_t cookie = 0;
    for (;;) {
        struct names page = { .stop_after = 100 };
        ck_assert_int_eq(V(f)->readdir(f, d, cookie, collect, &page), 0);
        for (int j = 0; j < page.n; j++) collect(&paged, page.v[j], 0, 0, 0);
        int n = page.n;
        if (n) cookie = page.cookie[n - 1];
        names_free(&page);
        if (n < 100) break;
    }
    ck_assert_int_eq(paged.n, all.n);
    for (int i = 0; i < all.n; i++) ck_assert_str_eq(paged.v[i], all.v[i]);
    names_free(&paged);
    names_free(&all);
    ck_assert_int_eq(V(f)->readdir(f, d, 1ull << 40, collect, &all), -EINVAL);
    nasd_fsroot_put(f);
    ck_assert_int_eq(fsck(devpath), 0);
}
END_TEST


START_TEST(statvfs_and_stale_handles)
{
    struct nasd_fsroot *f = fresh_fs();
    int r = R(f);
    struct statvfs s0, s1, s2;
    ck_assert_int_eq(V(f)->statvfs(f, &s0), 0);
    int fd = creat_file(f, r, "f");
    size_t n = 6u << 20;
    uint8_t *data = calloc(1, n);
    ck_assert_int_eq(V(f)->pwrite(f, fd, data, n, 0), (ssize_t)n);
    ck_assert_int_eq(V(f)->statvfs(f, &s1), 0);
    ck_assert_uint_le(s1.f_bfree, s0.f_bfree - n / 4096);
    ck_assert_uint_eq(s1.f_ffree, s0.f_ffree - 1);
    struct nasd_fh h, hr_dummy;
    ck_assert_int_eq(V(f)->handle(f, r, "", AT_EMPTY_PATH, &hr_dummy), 0);
    ck_assert_int_eq(V(f)->handle(f, r, "f", 0, &h), 0);
    ck_assert_int_eq(h.type, 0x4558);
    ck_assert_int_eq(h.len, 8);
    ck_assert_int_eq(V(f)->open_handle(f, &h, O_RDONLY), fd);
    ck_assert_int_eq(V(f)->open_handle(f, &h, O_RDONLY | O_DIRECTORY), -ENOTDIR);
    ck_assert_int_eq(V(f)->open_handle(f, &hr_dummy, O_RDWR), -EISDIR);
    struct nasd_fh hr;
    ck_assert_int_eq(V(f)->handle(f, r, "", AT_EMPTY_PATH, &hr), 0);
    ck_assert_int_eq(V(f)->open_handle(f, &hr, O_RDONLY | O_DIRECTORY), r);
    ck_assert_int_eq(V(f)->unlinkat(f, r, "f", 0), 0);
    ck_assert_int_eq(V(f)->statvfs(f, &s2), 0);
    ck_assert_uint_eq(s2.f_bfree, s0.f_bfree);
    ck_assert_uint_eq(s2.f_ffree, s0.f_ffree);
    ck_assert_int_eq(V(f)->open_handle(f, &h, O_RDONLY), -ESTALE);
    /* while fds are open on it, the inode number is not reused: they stay stale */
    int other = creat_file(f, r, "other");
    ck_assert_int_ne(other, fd);
    ck_assert_int_eq(V(f)->pwrite(f, fd, "x", 1, 0), -ESTALE);
    ck_assert_int_eq(V(f)->unlinkat(f, r, "other", 0), 0);
    V(f)->close(f, other);
    V(f)->close(f, fd);   /* creat_file's */
    V(f)->close(f, fd);   /* open_handle's */
    V(f)->close(f, fd);   /* a close too many is harmless */
    /* the inode number comes back for a new file: the old handle stays stale */
    int fd2 = creat_file(f, r, "g");
    ck_assert_int_eq(fd2, fd);
    ck_assert_int_eq(V(f)->open_handle(f, &h, O_RDONLY), -ESTALE);
    struct nasd_fh h2;
    ck_assert_int_eq(V(f)->handle(f, r, "g", 0, &h2), 0);
    ck_assert_int_eq(V(f)->open_handle(f, &h2, O_RDONLY), fd2);
    struct nasd_fh bad = h2;
    bad.len = 4;
    ck_assert_int_eq(V(f)->open_handle(f, &bad, O_RDONLY), -ESTALE);
    bad = h2;
    bad.type = 1;
    ck_assert_int_eq(V(f)->open_handle(f, &bad, O_RDONLY), -ESTALE);
    uint32_t forged[2] = { 0x7fffffff, 0 };
    memcpy(bad.bytes, forged, 8);
    bad.type = 0x4558;
    ck_assert_int_eq(V(f)->open_handle(f, &bad, O_RDONLY), -ESTALE);
    free(data);
    nasd_fsroot_put(f);
}
END_TEST

START_TEST(attributes)
{
    struct nasd_fsroot *f = fresh_fs();
    int r = R(f);
    int fd = creat_file(f, r, "f");
    ck_assert_int_eq(V(f)->chown(f, fd, 1000, 100), 0);
    ck_assert_int_eq(V(f)->chmod(f, fd, 04755), 0);
    struct stat st = st_of(f, r, "f");
    ck_assert_uint_eq(st.st_uid, 1000);
    ck_assert_uint_eq(st.st_gid, 100);
    ck_assert_uint_eq(st.st_mode, S_IFREG | 04755);
    ck_assert_int_eq(V(f)->chown(f, fd, 70000, (gid_t)-1), 0);   /* 32-bit ids */
    st = st_of(f, r, "f");
    ck_assert_uint_eq(st.st_uid, 70000);
    ck_assert_uint_eq(st.st_gid, 100);
    ck_assert_uint_eq(st.st_mode & 07777, 0755);   /* chown drops setuid */
    struct timespec ts[2] = { { 1000000000, 123456789 }, { 3000000000ll, 5 } };   /* mtime past 2038 */
    ck_assert_int_eq(V(f)->utimens(f, fd, ts), 0);
    st = st_of(f, r, "f");
    ck_assert_int_eq(st.st_atim.tv_sec, 1000000000);
    ck_assert_int_eq(st.st_atim.tv_nsec, 123456789);
    ck_assert_int_eq(st.st_mtim.tv_sec, 3000000000ll);
    ck_assert_int_eq(st.st_mtim.tv_nsec, 5);
    struct timespec omit[2] = { { 0, UTIME_OMIT }, { 0, UTIME_NOW } };
    ck_assert_int_eq(V(f)->utimens(f, fd, omit), 0);
    struct stat st2 = st_of(f, r, "f");
    ck_assert_int_eq(st2.st_atim.tv_sec, 1000000000);
    ck_assert_int_gt(st2.st_mtim.tv_sec, 1600000000);
    ck_assert(st2.st_ctim.tv_sec >= st2.st_mtim.tv_sec - 1);
    nasd_fsroot_put(f);
    ck_assert_int_eq(fsck(devpath), 0);
}
END_TEST

/* A large directory (name index + last-block appends): churn of creates, removes and
 * renames (within it, into and out of it) agrees with a model, also after a reopen,
 * and e2fsck finds it clean. */
START_TEST(large_directory_index)
{
    struct nasd_fsroot *f = fresh_fs();
    int r = R(f);
    ck_assert_int_eq(V(f)->mkdirat(f, r, "big", 0755), 0);
    ck_assert_int_eq(V(f)->mkdirat(f, r, "side", 0755), 0);
    int d = lookup_ino(f, r, "big"), side = lookup_ino(f, r, "side");
    enum { N = 6000 };
    static int8_t where[N];                  /* 0 absent, 1 in big as n<i>, 2 in big as m<i>, 3 in side */
    memset(where, 0, sizeof where);
    char a[32], b[32];
    for (int i = 0; i < N; i++) {
        snprintf(a, sizeof a, "n%d", i);
        ck_assert_int_gt(creat_file(f, d, a), 0);
        where[i] = 1;
    }
    uint64_t x = 12345;
    for (int step = 0; step < 8000; step++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        int i = (int)(x % N), op = (int)((x >> 32) % 4);
        const char *cur = where[i] == 1 ? "n" : where[i] == 2 ? "m" : "n";
        snprintf(a, sizeof a, "%s%d", cur, i);
        int dir = where[i] == 3 ? side : d;
        if (op == 0 && where[i]) {                       /* remove */
            ck_assert_int_eq(V(f)->unlinkat(f, dir, a, 0), 0);
            where[i] = 0;
        } else if (op == 1 && !where[i]) {               /* create again */
            snprintf(a, sizeof a, "n%d", i);
            ck_assert_int_gt(creat_file(f, d, a), 0);
            where[i] = 1;
        } else if (op == 2 && (where[i] == 1 || where[i] == 2)) {   /* rename within big */
            snprintf(b, sizeof b, "%s%d", where[i] == 1 ? "m" : "n", i);
            ck_assert_int_eq(V(f)->renameat(f, d, a, d, b), 0);
            where[i] = where[i] == 1 ? 2 : 1;
        } else if (op == 3 && where[i]) {                /* move between big and side */
            snprintf(b, sizeof b, "n%d", i);
            ck_assert_int_eq(V(f)->renameat(f, dir, a, where[i] == 3 ? d : side, b), 0);
            where[i] = where[i] == 3 ? 1 : 3;
        }
    }
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < N; i++) {
            struct stat st;
            snprintf(a, sizeof a, "n%d", i);
            snprintf(b, sizeof b, "m%d", i);
            ck_assert_int_eq(V(f)->fstatat(f, d, a, &st, AT_SYMLINK_NOFOLLOW), where[i] == 1 ? 0 : -ENOENT);
            ck_assert_int_eq(V(f)->fstatat(f, d, b, &st, AT_SYMLINK_NOFOLLOW), where[i] == 2 ? 0 : -ENOENT);
            ck_assert_int_eq(V(f)->fstatat(f, side, a, &st, AT_SYMLINK_NOFOLLOW), where[i] == 3 ? 0 : -ENOENT);
        }
        nasd_fsroot_put(f);
        ck_assert_int_eq(fsck(devpath), 0);
        f = reopen_fs();
        r = R(f);
        d = lookup_ino(f, r, "big");
        side = lookup_ino(f, r, "side");
    }
    nasd_fsroot_put(f);
}
END_TEST

static const struct nasd_vfs_cred alice = { 1000, 1000, 1, { 1000 } };
static const struct nasd_vfs_cred bob = { 1001, 1001, 2, { 1001, 50 } };

START_TEST(permissions)
{
    struct nasd_fsroot *f = fresh_fs();
    int r = R(f);
    /* root-owned 0755: nobody else may create or remove */
    nasd_vfs_set_cred(&alice);
    ck_assert_int_eq(creat_file(f, r, "x"), -EACCES);
    ck_assert_int_eq(V(f)->mkdirat(f, r, "x", 0755), -EACCES);
    ck_assert_int_eq(V(f)->symlinkat(f, "t", r, "x"), -EACCES);
    ck_assert_int_eq(V(f)->mknodat(f, r, "x", S_IFIFO | 0644, 0), -EACCES);
    nasd_vfs_set_cred(NULL);
    ck_assert_int_eq(V(f)->mkdirat(f, r, "tmp", 01777), 0);
    ck_assert_int_eq(V(f)->mkdirat(f, r, "priv", 0700), 0);
    int tmp = lookup_ino(f, r, "tmp"), priv = lookup_ino(f, r, "priv");
    ck_assert_uint_eq(st_of(f, r, "tmp").st_mode, S_IFDIR | 01777);
    int rootfile = creat_file(f, r, "rootfile");
    ck_assert_int_eq(V(f)->chmod(f, rootfile, 0644), 0);

    nasd_vfs_set_cred(&alice);
    ck_assert_int_eq(V(f)->unlinkat(f, r, "rootfile", 0), -EACCES);
    ck_assert_int_eq(V(f)->openat(f, r, "rootfile", O_WRONLY, 0), -EACCES);
    ck_assert_int_eq(V(f)->openat(f, r, "rootfile", O_RDONLY, 0), rootfile);
    ck_assert_int_eq(V(f)->chmod(f, rootfile, 0777), -EPERM);
    ck_assert_int_eq(V(f)->chown(f, rootfile, 1000, (gid_t)-1), -EPERM);
    ck_assert_int_eq(V(f)->utimens(f, rootfile, (struct timespec[2]){ { 1, 0 }, { 1, 0 } }), -EPERM);
    ck_assert_int_eq(V(f)->utimens(f, rootfile, NULL), -EACCES);
    struct stat st;
    ck_assert_int_eq(V(f)->fstatat(f, priv, "anything", &st, 0), -EACCES);   /* no search */
    ck_assert_int_eq(creat_file(f, priv, "x"), -EACCES);
    /* the sticky directory */
    int af = creat_file(f, tmp, "alice-file");
    ck_assert_int_gt(af, 0);
    st = st_of(f, tmp, "alice-file");
    ck_assert_uint_eq(st.st_uid, 1000);
    ck_assert_uint_eq(st.st_gid, 1000);
    ck_assert_uint_eq(st.st_mode, S_IFREG | 0644);
    ck_assert_int_eq(V(f)->chmod(f, af, 0666), 0);
    ck_assert_int_eq(V(f)->chown(f, af, 1001, (gid_t)-1), -EPERM);
    ck_assert_int_eq(V(f)->chown(f, af, (uid_t)-1, 50), -EPERM);     /* not alice's group */
    ck_assert_int_eq(V(f)->chown(f, af, 1000, 1000), 0);             /* no-op change is fine */
    ck_assert_int_eq(V(f)->mkdirat(f, tmp, "alice-dir", 0777), 0);
    nasd_vfs_set_cred(&bob);
    ck_assert_int_eq(V(f)->unlinkat(f, tmp, "alice-file", 0), -EPERM);
    ck_assert_int_eq(V(f)->renameat(f, tmp, "alice-file", tmp, "mine"), -EPERM);
    ck_assert_int_eq(V(f)->unlinkat(f, tmp, "alice-dir", AT_REMOVEDIR), -EPERM);
    int bf = creat_file(f, tmp, "bob-file");
    ck_assert_int_gt(bf, 0);
    ck_assert_int_eq(V(f)->renameat(f, tmp, "bob-file", tmp, "alice-file"), -EPERM);   /* replace */
    /* write permission on 0666 lets bob set times to now, but not explicit times */
    ck_assert_int_eq(V(f)->utimens(f, af, NULL), 0);
    ck_assert_int_eq(V(f)->utimens(f, af, (struct timespec[2]){ { 1, 0 }, { 1, 0 } }), -EPERM);
    ck_assert_int_eq(V(f)->openat(f, tmp, "alice-file", O_WRONLY | O_TRUNC, 0), af);
    nasd_vfs_set_cred(&alice);
    ck_assert_int_eq(V(f)->unlinkat(f, tmp, "bob-file", 0), -EPERM);
    ck_assert_int_eq(V(f)->unlinkat(f, tmp, "alice-file", 0), 0);
    ck_assert_int_eq(V(f)->unlinkat(f, tmp, "alice-dir", AT_REMOVEDIR), 0);
    nasd_vfs_set_cred(NULL);   /* root may remove anything */
    ck_assert_int_eq(V(f)->unlinkat(f, tmp, "bob-file", 0), 0);

    /* setgid inheritance */
    ck_assert_int_eq(V(f)->mkdirat(f, r, "shared", 0777), 0);
    int sh = lookup_ino(f, r, "shared");
    ck_assert_int_eq(V(f)->chown(f, sh, 0, 50), 0);
    ck_assert_int_eq(V(f)->chmod(f, sh, 02777), 0);
    nasd_vfs_set_cred(&alice);
    ck_assert_int_gt(creat_file(f, sh, "file"), 0);
    ck_assert_uint_eq(st_of(f, sh, "file").st_gid, 50);
    ck_assert_int_eq(V(f)->mkdirat(f, sh, "sub", 0755), 0);
    st = st_of(f, sh, "sub");
    ck_assert_uint_eq(st.st_gid, 50);
    ck_assert_uint_eq(st.st_mode, S_IFDIR | 02755);
    /* chmod by a non-member of the file's group drops setgid */
    int fl = lookup_ino(f, sh, "file");
    ck_assert_int_eq(V(f)->chmod(f, fl, 02755), 0);
    ck_assert_uint_eq(st_of(f, sh, "file").st_mode, S_IFREG | 0755);
    nasd_vfs_set_cred(&bob);   /* bob is in group 50 */
    int bfile = creat_file(f, sh, "bobs");
    ck_assert_int_eq(V(f)->chmod(f, bfile, 02755), 0);
    ck_assert_uint_eq(st_of(f, sh, "bobs").st_mode, S_IFREG | 02755);
    ck_assert_int_eq(V(f)->chown(f, bfile, (uid_t)-1, 1001), 0);     /* owner, own group */
    ck_assert_uint_eq(st_of(f, sh, "bobs").st_gid, 1001);
    ck_assert_int_eq(V(f)->mknodat(f, sh, "dev", S_IFCHR | 0600, makedev(1, 3)), -EPERM);
    nasd_vfs_set_cred(NULL);
    nasd_fsroot_put(f);
    ck_assert_int_eq(fsck(devpath), 0);
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("vfs_ext2");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, tmp_setup, tmp_teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, format_and_open);
    tcase_add_test(tc, file_read_write);
    tcase_add_test(tc, truncate_grow_shrink);
    tcase_add_test(tc, directories);
    tcase_add_test(tc, renames);
    tcase_add_test(tc, links_symlinks_nodes);
    tcase_add_test(tc, readdir_2000_resume);
    tcase_add_test(tc, large_directory_index);
    tcase_add_test(tc, statvfs_and_stale_handles);
    tcase_add_test(tc, attributes);
    tcase_add_test(tc, permissions);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    nasd_log_level = LOG_WARN;
    return run_suite(make_suite());
}
