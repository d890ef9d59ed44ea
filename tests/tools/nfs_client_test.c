/* libnfs (sync API) functional test of an NFSv3 server.
 *   nfs_client_test URL MODE [ARG]
 * URL: nfs://127.0.0.1/export?nfsport=P&mountport=M
 * MODE: basic | ro | quota BYTES | owner UID | suid | mount-fail | save-handle FILE |
 *       check-handle FILE | portmap PMPORT NFSPORT MOUNTPORT | live SERVERPID
 * Exits 0 when every check passes; prints the failing check otherwise. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/time.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <nfsc/libnfs.h>
#include <nfsc/libnfs-raw.h>
#include <nfsc/libnfs-raw-mount.h>
#include <nfsc/libnfs-raw-portmap.h>
#include <nfsc/libnfs-raw-nfs.h>
#include <xxhash.h>

/* libnfs 4.0 returns this (private) layout from nfs_get_fh(). */
struct libnfs_fh { int len; char *val; };

static int failures;
#define CHECK(cond, ...) do { if (!(cond)) { failures++; fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
    fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); } } while (0)

static struct nfs_context *nfs;

static void fill_random(uint8_t *b, size_t n, uint64_t seed)
{
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++) { x ^= x << 13; x ^= x >> 7; x ^= x << 17; b[i] = (uint8_t)x; }
}

static int write_all(struct nfsfh *fh, uint64_t off, const uint8_t *b, size_t n, size_t chunk)
{
    size_t done = 0;
    while (done < n) {
        size_t c = n - done < chunk ? n - done : chunk;
        int r = nfs_pwrite(nfs, fh, off + done, c, b + done);
        if (r <= 0) return r < 0 ? r : -EIO;
        done += (size_t)r;
    }
    return 0;
}

static int read_all(struct nfsfh *fh, uint64_t off, uint8_t *b, size_t n)
{
    size_t done = 0;
    while (done < n) {
        size_t c = n - done < 200000 ? n - done : 200000;
        int r = nfs_pread(nfs, fh, off + done, c, b + done);
        if (r < 0) return r;
        if (r == 0) break;
        done += (size_t)r;
    }
    return (int)done;
}

static int count_entries(const char *dir, const char *must_have)
{
    struct nfsdir *d;
    if (nfs_opendir(nfs, dir, &d)) return -1;
    int n = 0, found = must_have ? 0 : 1;
    struct nfsdirent *e;
    while ((e = nfs_readdir(nfs, d))) {
        if (!strcmp(e->name, ".") || !strcmp(e->name, "..")) continue;
        n++;
        if (must_have && !strcmp(e->name, must_have)) found = 1;
    }
    nfs_closedir(nfs, d);
    return found ? n : -2;
}


/* ---- raw calls (handles the high-level API hides) ---- */
static const char *g_server;
static int g_mountport;
static const char *g_export;

struct fhbuf { uint8_t b[64]; uint32_t len; };
struct raw_res { int done, status; uint32_t st; struct fhbuf fh; };

static int rpc_wait(struct rpc_context *rpc, int *done)
{
    while (!*done) {
        struct pollfd p = { .fd = rpc_get_fd(rpc), .events = rpc_which_events(rpc) };
        if (poll(&p, 1, 5000) <= 0) return -1;
        if (rpc_service(rpc, p.revents) < 0) return -1;
    }
    return 0;
}

static void connect_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
    (void)rpc; (void)data;
    struct raw_res *r = priv;
    r->done = 1;
    r->status = status;
}

static void mnt_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
    (void)rpc;
    struct raw_res *r = priv;
    r->done = 1;
    r->status = status;
    if (status != RPC_STATUS_SUCCESS) return;
    mountres3 *m = data;
    r->st = m->fhs_status;
    if (m->fhs_status == MNT3_OK && m->mountres3_u.mountinfo.fhandle.fhandle3_len <= 64) {
        r->fh.len = m->mountres3_u.mountinfo.fhandle.fhandle3_len;
        memcpy(r->fh.b, m->mountres3_u.mountinfo.fhandle.fhandle3_val, r->fh.len);
    }
}

/* Root handle straight from MOUNT (libnfs keeps its own private). */
static int raw_root_fh(struct fhbuf *out)
{
    struct rpc_context *rpc = rpc_init_context();
    struct raw_res r = { 0 };
    int ok = rpc && rpc_connect_port_async(rpc, g_server, g_mountport, MOUNT_PROGRAM, MOUNT_V3, connect_cb, &r) == 0 &&
             rpc_wait(rpc, &r.done) == 0 && r.status == RPC_STATUS_SUCCESS;
    if (ok) {
        memset(&r, 0, sizeof r);
        ok = rpc_mount3_mnt_async(rpc, mnt_cb, (char *)g_export, &r) == 0 && rpc_wait(rpc, &r.done) == 0 &&
             r.status == RPC_STATUS_SUCCESS && r.st == MNT3_OK;
    }
    if (rpc) rpc_destroy_context(rpc);
    if (ok) *out = r.fh;
    return ok ? 0 : -1;
}

static void lookup_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
    (void)rpc;
    struct raw_res *r = priv;
    r->done = 1;
    r->status = status;
    if (status != RPC_STATUS_SUCCESS) return;
    LOOKUP3res *l = data;
    r->st = l->status;
    if (l->status == NFS3_OK && l->LOOKUP3res_u.resok.object.data.data_len <= 64) {
        r->fh.len = l->LOOKUP3res_u.resok.object.data.data_len;
        memcpy(r->fh.b, l->LOOKUP3res_u.resok.object.data.data_val, r->fh.len);
    }
}

static uint32_t raw_lookup(const struct fhbuf *dir, const char *name, struct fhbuf *out)
{
    struct rpc_context *rpc = nfs_get_rpc_context(nfs);
    LOOKUP3args a;
    a.what.dir.data.data_len = dir->len;
    a.what.dir.data.data_val = (char *)dir->b;
    a.what.name = (char *)name;
    struct raw_res r = { 0 };
    if (rpc_nfs3_lookup_async(rpc, lookup_cb, &a, &r) || rpc_wait(rpc, &r.done) || r.status != RPC_STATUS_SUCCESS)
        return 0xffffffff;
    if (out) *out = r.fh;
    return r.st;
}

static int fh_eq(const struct fhbuf *a, const struct fhbuf *b) { return a->len == b->len && !memcmp(a->b, b->b, a->len); }


static void getport_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
    (void)rpc;
    struct raw_res *r = priv;
    r->done = 1;
    r->status = status;
    if (status == RPC_STATUS_SUCCESS) r->st = *(uint32_t *)data;
}

static void dump_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
    (void)rpc;
    struct raw_res *r = priv;
    r->done = 1;
    r->status = status;
    if (status != RPC_STATUS_SUCCESS) return;
    for (struct pmap2_mapping_list *l = ((struct pmap2_dump_result *)data)->list; l; l = l->next) r->st++;
}

/* Built-in portmapper on a test port: GETPORT must name our NFS/MOUNT ports. */
static void test_portmap(int pmport, int nfsport, int mountport)
{
    struct rpc_context *rpc = rpc_init_context();
    struct raw_res r = { 0 };
    if (rpc_connect_port_async(rpc, g_server, pmport, PMAP_PROGRAM, PMAP_V2, connect_cb, &r) ||
        rpc_wait(rpc, &r.done) || r.status != RPC_STATUS_SUCCESS) {
        CHECK(0, "connect to portmapper on %d", pmport);
        rpc_destroy_context(rpc);
        return;
    }
    const int q[3][3] = { { 100003, 3, nfsport }, { 100005, 3, mountport }, { 100099, 1, 0 } };
    for (int i = 0; i < 3; i++) {
        memset(&r, 0, sizeof r);
        CHECK(rpc_pmap2_getport_async(rpc, q[i][0], q[i][1], 6, getport_cb, &r) == 0 && rpc_wait(rpc, &r.done) == 0 &&
              r.status == RPC_STATUS_SUCCESS && (int)r.st == q[i][2],
              "GETPORT %d v%d: %u, expected %d", q[i][0], q[i][1], r.st, q[i][2]);
    }
    struct raw_res d = { 0 };
    CHECK(rpc_pmap2_dump_async(rpc, dump_cb, &d) == 0 && rpc_wait(rpc, &d.done) == 0 && d.st >= 3,
          "DUMP lists %u mappings", d.st);
    rpc_destroy_context(rpc);
}


/* ---- procedures the high-level API does not reach ---- */
struct raw_dir { int done, status; uint32_t st; int n, found, eof; uint64_t last_cookie; };

static void readdir_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
    (void)rpc;
    struct raw_dir *r = priv;
    r->done = 1;
    r->status = status;
    if (status != RPC_STATUS_SUCCESS) return;
    READDIR3res *res = data;
    r->st = res->status;
    if (res->status) return;
    for (entry3 *e = res->READDIR3res_u.resok.reply.entries; e; e = e->nextentry) {
        r->n++;
        if (!strcmp(e->name, "t_dir")) r->found = 1;
        r->last_cookie = e->cookie;
    }
    r->eof = res->READDIR3res_u.resok.reply.eof;
}

static void generic_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
    (void)rpc;
    struct raw_res *r = priv;
    r->done = 1;
    r->status = status;
    if (status == RPC_STATUS_SUCCESS) r->st = *(uint32_t *)data;   /* nfsstat3 comes first */
    if (status == RPC_STATUS_SUCCESS && r->st == NFS3_OK) r->fh.len = 1;
}

static void access_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
    generic_cb(rpc, status, data, priv);
    struct raw_res *r = priv;
    if (status == RPC_STATUS_SUCCESS && r->st == NFS3_OK) r->fh.len = ((ACCESS3res *)data)->ACCESS3res_u.resok.access;
}

static uint32_t raw_create(const struct fhbuf *dir, const char *name, createmode3 mode, const char *verf)
{
    CREATE3args a;
    memset(&a, 0, sizeof a);
    a.where.dir.data.data_len = dir->len;
    a.where.dir.data.data_val = (char *)dir->b;
    a.where.name = (char *)name;
    a.how.mode = mode;
    if (mode == EXCLUSIVE) memcpy(a.how.createhow3_u.verf, verf, NFS3_CREATEVERFSIZE);
    struct raw_res r = { 0 };
    if (rpc_nfs3_create_async(nfs_get_rpc_context(nfs), generic_cb, &a, &r) || rpc_wait(nfs_get_rpc_context(nfs), &r.done))
        return 0xffffffff;
    return r.st;
}

static void test_raw_procs(const struct fhbuf *root)
{
    struct rpc_context *rpc = nfs_get_rpc_context(nfs);
    /* READDIR (plain) in small chunks: cookies must advance to eof */
    uint64_t cookie = 0;
    int calls = 0, total = 0, found = 0;
    char verf[8] = { 0 };
    for (;;) {
        READDIR3args a;
        memset(&a, 0, sizeof a);
        a.dir.data.data_len = root->len;
        a.dir.data.data_val = (char *)root->b;
        a.cookie = cookie;
        memcpy(a.cookieverf, verf, 8);
        a.count = 160;          /* room for about one entry per reply */
        struct raw_dir r = { 0 };
        if (rpc_nfs3_readdir_async(rpc, readdir_cb, &a, &r) || rpc_wait(rpc, &r.done) || r.st) {
            CHECK(0, "READDIR status %u", r.st);
            break;
        }
        calls++;
        total += r.n;
        found |= r.found;
        if (r.eof) break;
        CHECK(r.n > 0, "READDIR returned no entries without eof");
        if (r.n == 0 || calls > 1000) break;
        cookie = r.last_cookie;
    }
    CHECK(found && calls > 1, "READDIR in %d calls, %d entries, t_dir %s", calls, total, found ? "found" : "missing");
    /* PATHCONF, ACCESS */
    PATHCONF3args pa = { .object = { .data = { root->len, (char *)root->b } } };
    struct raw_res r = { 0 };
    CHECK(rpc_nfs3_pathconf_async(rpc, generic_cb, &pa, &r) == 0 && rpc_wait(rpc, &r.done) == 0 && r.st == NFS3_OK,
          "PATHCONF status %u", r.st);
    ACCESS3args aa = { .object = { .data = { root->len, (char *)root->b } }, .access = 0x3f };
    memset(&r, 0, sizeof r);
    CHECK(rpc_nfs3_access_async(rpc, access_cb, &aa, &r) == 0 && rpc_wait(rpc, &r.done) == 0 && r.st == NFS3_OK &&
          (r.fh.len & 0x1f) == 0x1f, "ACCESS for root on the root dir: 0x%x", r.fh.len);
    /* CREATE modes */
    CHECK(raw_create(root, "excl", EXCLUSIVE, "verifier") == NFS3_OK, "EXCLUSIVE create");
    CHECK(raw_create(root, "excl", EXCLUSIVE, "verifier") == NFS3_OK, "EXCLUSIVE retransmission (same verifier)");
    CHECK(raw_create(root, "excl", EXCLUSIVE, "another!") == NFS3ERR_EXIST, "EXCLUSIVE with another verifier");
    CHECK(raw_create(root, "excl", GUARDED, NULL) == NFS3ERR_EXIST, "GUARDED on an existing file");
    CHECK(raw_create(root, "excl", UNCHECKED, NULL) == NFS3_OK, "UNCHECKED on an existing file");
    CHECK(raw_create(root, "t_dir", UNCHECKED, NULL) == NFS3ERR_EXIST, "UNCHECKED over a directory");
    nfs_unlink(nfs, "/excl");
}

/* LOOKUP ".." at the root gives the root; names with '/' are refused. */
static void test_dotdot(void)
{
    struct fhbuf root, h, sub;
    if (raw_root_fh(&root)) { CHECK(0, "raw MOUNT failed"); return; }
    CHECK(raw_lookup(&root, "..", &h) == NFS3_OK && fh_eq(&h, &root), "LOOKUP .. at the export root is not the root");
    CHECK(raw_lookup(&root, ".", &h) == NFS3_OK && fh_eq(&h, &root), "LOOKUP . at the root");
    CHECK(raw_lookup(&root, "t_dir", &sub) == NFS3_OK, "LOOKUP t_dir");
    CHECK(raw_lookup(&sub, "..", &h) == NFS3_OK && fh_eq(&h, &root), "LOOKUP t_dir/.. is not the root");
    CHECK(raw_lookup(&root, "../..", &h) != NFS3_OK, "LOOKUP of a name with '/' succeeded");
    CHECK(raw_lookup(&root, "nonexistent", &h) == NFS3ERR_NOENT, "LOOKUP of a missing name");
    test_raw_procs(&root);
}

static void test_basic(void)
{
    struct nfs_stat_64 st, root;
    nfs_unlink(nfs, "/t_dir/esc"); /* leftovers of a failed run are not an error */
    CHECK(nfs_stat64(nfs, "/", &root) == 0, "stat /: %s", nfs_get_error(nfs));
    CHECK(nfs_mkdir(nfs, "/t_dir") == 0, "mkdir: %s", nfs_get_error(nfs));
    CHECK(nfs_mkdir(nfs, "/t_dir") != 0, "mkdir of an existing dir succeeded");
    CHECK(nfs_mkdir(nfs, "/t_dir/sub") == 0, "mkdir sub: %s", nfs_get_error(nfs));

    /* write 3 MiB in odd chunk sizes, read back, compare checksums */
    size_t len = 3 * 1024 * 1024 + 123;
    uint8_t *data = malloc(len), *back = malloc(len);
    fill_random(data, len, 7);
    struct nfsfh *fh = NULL;
    CHECK(nfs_creat(nfs, "/t_dir/f1", 0644, &fh) == 0, "creat: %s", nfs_get_error(nfs));
    if (fh) {
        CHECK(write_all(fh, 0, data, len, 65536 + 17) == 0, "write: %s", nfs_get_error(nfs));
        CHECK(nfs_fsync(nfs, fh) == 0, "fsync (COMMIT): %s", nfs_get_error(nfs));
        nfs_close(nfs, fh);
    }
    CHECK(nfs_open(nfs, "/t_dir/f1", O_RDONLY, &fh) == 0, "open: %s", nfs_get_error(nfs));
    if (fh) {
        memset(back, 0, len);
        CHECK(read_all(fh, 0, back, len) == (int)len, "short read");
        CHECK(XXH64(data, len, 0) == XXH64(back, len, 0), "checksum mismatch after read back");
        nfs_close(nfs, fh);
    }
    CHECK(nfs_stat64(nfs, "/t_dir/f1", &st) == 0 && st.nfs_size == len, "size after write");

    /* setattr truncate */
    CHECK(nfs_truncate(nfs, "/t_dir/f1", 1000) == 0, "truncate: %s", nfs_get_error(nfs));
    CHECK(nfs_stat64(nfs, "/t_dir/f1", &st) == 0 && st.nfs_size == 1000, "size after truncate %llu",
          (unsigned long long)st.nfs_size);
    CHECK(nfs_open(nfs, "/t_dir/f1", O_RDWR, &fh) == 0, "reopen: %s", nfs_get_error(nfs));
    if (fh) {
        CHECK(read_all(fh, 0, back, len) == 1000 && !memcmp(back, data, 1000), "content after truncate");
        CHECK(nfs_ftruncate(nfs, fh, 0) == 0, "ftruncate 0");
        nfs_close(nfs, fh);
    }
    CHECK(nfs_chmod(nfs, "/t_dir/f1", 0600) == 0, "chmod: %s", nfs_get_error(nfs));
    CHECK(nfs_stat64(nfs, "/t_dir/f1", &st) == 0 && (st.nfs_mode & 07777) == 0600, "mode after chmod %o",
          (unsigned)st.nfs_mode);

    CHECK(nfs_chown(nfs, "/t_dir/f1", 1234, 5678) == 0, "chown: %s", nfs_get_error(nfs));
    CHECK(nfs_stat64(nfs, "/t_dir/f1", &st) == 0 && st.nfs_uid == 1234 && st.nfs_gid == 5678, "owner after chown");
    struct timeval tv[2] = { { .tv_sec = 1000000000 }, { .tv_sec = 1234567890 } };
    CHECK(nfs_utimes(nfs, "/t_dir/f1", tv) == 0, "utimes: %s", nfs_get_error(nfs));
    CHECK(nfs_stat64(nfs, "/t_dir/f1", &st) == 0 && st.nfs_mtime == 1234567890 && st.nfs_atime == 1000000000,
          "times after utimes: %llu", (unsigned long long)st.nfs_mtime);
    CHECK(nfs_mknod(nfs, "/t_dir/fifo", S_IFIFO | 0600, 0) == 0, "mknod fifo: %s", nfs_get_error(nfs));
    CHECK(nfs_lstat64(nfs, "/t_dir/fifo", &st) == 0 && S_ISFIFO(st.nfs_mode), "fifo type");
    CHECK(nfs_unlink(nfs, "/t_dir/fifo") == 0, "unlink fifo");

    /* rename, hard link, symlink */
    CHECK(nfs_rename(nfs, "/t_dir/f1", "/t_dir/sub/f2") == 0, "rename: %s", nfs_get_error(nfs));
    CHECK(nfs_stat64(nfs, "/t_dir/f1", &st) != 0, "old name still exists after rename");
    CHECK(nfs_stat64(nfs, "/t_dir/sub/f2", &st) == 0, "new name missing after rename");
    CHECK(nfs_link(nfs, "/t_dir/sub/f2", "/t_dir/hard") == 0, "link: %s", nfs_get_error(nfs));
    CHECK(nfs_stat64(nfs, "/t_dir/hard", &st) == 0 && st.nfs_nlink == 2, "nlink after link");
    CHECK(nfs_symlink(nfs, "sub/f2", "/t_dir/lnk") == 0, "symlink: %s", nfs_get_error(nfs));
    char buf[256] = "";
    CHECK(nfs_readlink(nfs, "/t_dir/lnk", buf, sizeof buf) == 0 && !strcmp(buf, "sub/f2"), "readlink '%s'", buf);
    CHECK(nfs_lstat64(nfs, "/t_dir/lnk", &st) == 0 && S_ISLNK(st.nfs_mode), "lstat symlink");

    /* no escape: "..", symlinks out of the export */
    struct nfs_stat_64 up;
    test_dotdot();
    CHECK(nfs_symlink(nfs, "../../../../../../etc", "/t_dir/esc") == 0, "symlink esc");
    CHECK(nfs_stat64(nfs, "/t_dir/esc/passwd", &up) != 0, "symlink escaped the export to /etc/passwd");
    nfs_unlink(nfs, "/t_dir/esc");

    /* many entries: READDIRPLUS continuation with cookies */
    CHECK(nfs_mkdir(nfs, "/t_dir/many") == 0, "mkdir many");
    char name[64];
    int made = 0;
    for (int i = 0; i < 1500; i++) {
        snprintf(name, sizeof name, "/t_dir/many/file-with-a-longish-name-%04d", i);
        if (nfs_creat(nfs, name, 0644, &fh) == 0) { nfs_close(nfs, fh); made++; }
    }
    CHECK(made == 1500, "created %d/1500", made);
    CHECK(count_entries("/t_dir/many", "file-with-a-longish-name-1499") == 1500, "readdir of 1500 entries: %d",
          count_entries("/t_dir/many", NULL));
    CHECK(count_entries("/t_dir", "lnk") == 4, "readdir /t_dir");
    CHECK(nfs_rmdir(nfs, "/t_dir/many") != 0, "rmdir of a non-empty dir succeeded");
    for (int i = 0; i < 1500; i++) {
        snprintf(name, sizeof name, "/t_dir/many/file-with-a-longish-name-%04d", i);
        nfs_unlink(nfs, name);
    }
    CHECK(count_entries("/t_dir/many", NULL) == 0, "entries left after unlink");

    struct nfs_statvfs_64 vfs;
    CHECK(nfs_statvfs64(nfs, "/", &vfs) == 0 && vfs.f_blocks > 0, "statvfs");

    /* cleanup */
    CHECK(nfs_unlink(nfs, "/t_dir/lnk") == 0, "unlink lnk");
    CHECK(nfs_unlink(nfs, "/t_dir/hard") == 0, "unlink hard");
    CHECK(nfs_unlink(nfs, "/t_dir/sub/f2") == 0, "unlink f2");
    CHECK(nfs_unlink(nfs, "/t_dir/sub/f2") != 0, "unlink of a missing file succeeded");
    CHECK(nfs_rmdir(nfs, "/t_dir/many") == 0, "rmdir many");
    CHECK(nfs_rmdir(nfs, "/t_dir/sub") == 0, "rmdir sub");
    CHECK(nfs_rmdir(nfs, "/t_dir") == 0, "rmdir: %s", nfs_get_error(nfs));
    free(data);
    free(back);
}

static void test_ro(void)
{
    struct nfsfh *fh = NULL;
    CHECK(count_entries("/", NULL) >= 0, "readdir on a read-only export");
    CHECK(nfs_creat(nfs, "/ro-should-fail", 0644, &fh) != 0, "create on a read-only export succeeded");
    CHECK(nfs_mkdir(nfs, "/ro-dir") != 0, "mkdir on a read-only export succeeded");
    if (nfs_open(nfs, "/hello.txt", O_RDWR, &fh) == 0 || nfs_open(nfs, "/hello.txt", O_RDONLY, &fh) == 0) {
        char b[64];
        CHECK(nfs_pread(nfs, fh, 0, sizeof b, b) > 0, "read on a read-only export");
        CHECK(nfs_pwrite(nfs, fh, 0, 3, "xyz") < 0, "write on a read-only export succeeded");
        nfs_close(nfs, fh);
    } else {
        CHECK(0, "open /hello.txt: %s", nfs_get_error(nfs));
    }
}

static void test_quota(uint64_t quota)
{
    struct nfsfh *fh = NULL;
    CHECK(nfs_creat(nfs, "/q.bin", 0644, &fh) == 0, "creat: %s", nfs_get_error(nfs));
    if (!fh) return;
    size_t chunk = 256 * 1024;
    uint8_t *b = malloc(chunk);
    fill_random(b, chunk, 3);
    uint64_t off = 0;
    int r = 0;
    while (off <= quota + 4 * chunk) {
        r = nfs_pwrite(nfs, fh, off, chunk, b);
        if (r < 0) break;
        off += (uint64_t)r;
    }
    CHECK(r < 0, "writing past the quota (%llu bytes) did not fail", (unsigned long long)quota);
    CHECK(off <= quota, "wrote %llu bytes with quota %llu", (unsigned long long)off, (unsigned long long)quota);
    printf("quota: write failed after %llu bytes: %s\n", (unsigned long long)off, nfs_get_error(nfs));
    struct nfs_statvfs_64 vfs;
    /* libnfs reports whole blocks of f_frsize */
    CHECK(nfs_statvfs64(nfs, "/", &vfs) == 0 && vfs.f_blocks * vfs.f_frsize <= quota &&
          vfs.f_blocks * vfs.f_frsize + vfs.f_frsize > quota,
          "FSSTAT total %llu != quota", (unsigned long long)(vfs.f_blocks * vfs.f_frsize));
    nfs_close(nfs, fh);
    CHECK(nfs_unlink(nfs, "/q.bin") == 0, "unlink");
    /* space is returned: a small write works again */
    CHECK(nfs_creat(nfs, "/q.bin", 0644, &fh) == 0, "creat again");
    if (fh) {
        CHECK(nfs_pwrite(nfs, fh, 0, chunk, b) == (int)chunk, "write after freeing quota: %s", nfs_get_error(nfs));
        nfs_close(nfs, fh);
    }
    nfs_unlink(nfs, "/q.bin");

    /* usage follows rename-over and truncation (FSSTAT free space = quota - used) */
    uint64_t f0 = 0, f1 = 0, f2 = 0, f3 = 0;
    if (nfs_statvfs64(nfs, "/", &vfs) == 0) f0 = vfs.f_bfree * vfs.f_frsize;
    const char *names[2] = { "/r1.bin", "/r2.bin" };
    for (int i = 0; i < 2; i++) {
        if (nfs_creat(nfs, names[i], 0644, &fh) == 0) {
            CHECK(nfs_pwrite(nfs, fh, 0, chunk, b) == (int)chunk, "write %s", names[i]);
            nfs_close(nfs, fh);
        }
    }
    if (nfs_statvfs64(nfs, "/", &vfs) == 0) f1 = vfs.f_bfree * vfs.f_frsize;
    CHECK(f0 - f1 == 2 * chunk, "two %zu-byte files used %llu bytes of quota", chunk, (unsigned long long)(f0 - f1));
    CHECK(nfs_rename(nfs, "/r1.bin", "/r2.bin") == 0, "rename over: %s", nfs_get_error(nfs));
    if (nfs_statvfs64(nfs, "/", &vfs) == 0) f2 = vfs.f_bfree * vfs.f_frsize;
    CHECK(f0 - f2 == chunk, "after rename-over usage is %llu, want %zu", (unsigned long long)(f0 - f2), chunk);
    CHECK(nfs_truncate(nfs, "/r2.bin", 0) == 0, "truncate: %s", nfs_get_error(nfs));
    if (nfs_statvfs64(nfs, "/", &vfs) == 0) f3 = vfs.f_bfree * vfs.f_frsize;
    CHECK(f3 == f0, "after truncate usage is %llu, want 0", (unsigned long long)(f0 - f3));
    /* quota counts allocated blocks, like du: a 100 MiB sparse file with 4 KiB written
     * (size past the quota) uses about 4 KiB */
    uint64_t sparse = 100ull << 20, f4 = 0;
    CHECK(nfs_truncate(nfs, "/r2.bin", quota * 2) == 0, "sparse truncate past the quota: %s", nfs_get_error(nfs));
    if (nfs_open(nfs, "/r2.bin", O_RDWR, &fh) == 0) {
        CHECK(nfs_pwrite(nfs, fh, sparse - 4096, 4096, b) == 4096, "4 KiB at 100 MiB - 4 KiB: %s", nfs_get_error(nfs));
        nfs_close(nfs, fh);
    }
    if (nfs_statvfs64(nfs, "/", &vfs) == 0) f4 = vfs.f_bfree * vfs.f_frsize;
    CHECK(f0 - f4 >= 4096 && f0 - f4 <= 65536, "a sparse file with 4 KiB written uses %llu bytes of quota",
          (unsigned long long)(f0 - f4));
    nfs_unlink(nfs, "/r2.bin");
    if (nfs_statvfs64(nfs, "/", &vfs) == 0) f4 = vfs.f_bfree * vfs.f_frsize;
    CHECK(f4 == f0, "after removing the sparse file usage is %llu, want 0", (unsigned long long)(f0 - f4));
    free(b);
}

static void test_owner(int uid)
{
    struct nfsfh *fh = NULL;
    struct nfs_stat_64 st;
    CHECK(nfs_creat(nfs, "/owner.txt", 0644, &fh) == 0, "creat: %s", nfs_get_error(nfs));
    if (fh) nfs_close(nfs, fh);
    CHECK(nfs_stat64(nfs, "/owner.txt", &st) == 0 && (int)st.nfs_uid == uid, "owner %d, expected %d",
          (int)st.nfs_uid, uid);
    nfs_unlink(nfs, "/owner.txt");
}

/* A write by someone other than the owner clears setuid/setgid, as Linux's
 * file_remove_privs does; the server's WRITE ran as root and kept them. */
static void test_suid(void)
{
    struct nfsfh *fh = NULL;
    struct nfs_stat_64 st;
    nfs_set_uid(nfs, 2000);
    nfs_set_gid(nfs, 2000);
    CHECK(nfs_creat(nfs, "/suid.bin", 0666, &fh) == 0, "creat as 2000: %s", nfs_get_error(nfs));
    if (fh) nfs_close(nfs, fh);
    CHECK(nfs_chmod(nfs, "/suid.bin", 06777) == 0, "chmod 06777 by the owner: %s", nfs_get_error(nfs));
    CHECK(nfs_stat64(nfs, "/suid.bin", &st) == 0 && (st.nfs_mode & 07777) == 06777, "mode after chmod: %o",
          (unsigned)(st.nfs_mode & 07777));
    nfs_set_uid(nfs, 1000);
    nfs_set_gid(nfs, 1000);
    fh = NULL;
    CHECK(nfs_open(nfs, "/suid.bin", O_WRONLY, &fh) == 0, "open as 1000: %s", nfs_get_error(nfs));
    if (fh) {
        CHECK(nfs_pwrite(nfs, fh, 0, 4, "data") == 4, "write as 1000: %s", nfs_get_error(nfs));
        nfs_close(nfs, fh);
    }
    CHECK(nfs_stat64(nfs, "/suid.bin", &st) == 0 && (st.nfs_mode & 07777) == 0777,
          "mode after a non-owner's write: %o, want 777", (unsigned)(st.nfs_mode & 07777));
    nfs_set_uid(nfs, 2000);
    nfs_set_gid(nfs, 2000);
    nfs_unlink(nfs, "/suid.bin");
}

/* Server reconfigured live by signals (see nfs_serve): read-only, denied network,
 * back to normal, then export removed. */
static void test_live(pid_t server)
{
    struct nfsfh *fh = NULL;
    struct nfs_stat_64 st;
    CHECK(nfs_creat(nfs, "/live-a", 0644, &fh) == 0, "creat: %s", nfs_get_error(nfs));
    if (fh) nfs_close(nfs, fh);
    kill(server, SIGUSR1);                      /* -> read-only */
    usleep(200000);
    CHECK(nfs_creat(nfs, "/live-b", 0644, &fh) != 0, "create after switching to read-only succeeded");
    CHECK(nfs_stat64(nfs, "/live-a", &st) == 0, "stat on the read-only export: %s", nfs_get_error(nfs));
    kill(server, SIGUSR1);                      /* -> only 10.0.0.0/8 */
    usleep(200000);
    CHECK(nfs_stat64(nfs, "/live-a", &st) != 0, "stat from a now-denied network succeeded");
    kill(server, SIGUSR1);                      /* -> normal */
    usleep(200000);
    CHECK(nfs_stat64(nfs, "/live-a", &st) == 0, "stat after re-allowing: %s", nfs_get_error(nfs));
    CHECK(nfs_unlink(nfs, "/live-a") == 0, "unlink after re-allowing: %s", nfs_get_error(nfs));
    kill(server, SIGUSR2);                      /* export removed */
    usleep(200000);
    CHECK(nfs_stat64(nfs, "/", &st) != 0, "stat on a removed export succeeded");
}

/* ---- raw calls with saved handles ---- */
struct raw_wait { int done, status; uint32_t nfsstatus; char data[256]; uint32_t len; };

static void read_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
    (void)rpc;
    struct raw_wait *w = priv;
    w->done = 1;
    w->status = status;
    if (status == RPC_STATUS_SUCCESS) {
        READ3res *res = data;
        w->nfsstatus = res->status;
        if (res->status == NFS3_OK) {
            w->len = res->READ3res_u.resok.data.data_len < sizeof w->data ? res->READ3res_u.resok.data.data_len : 0;
            memcpy(w->data, res->READ3res_u.resok.data.data_val, w->len);
        }
    }
}

static int raw_read(const uint8_t *fh, uint32_t fhlen, struct raw_wait *w)
{
    struct rpc_context *rpc = nfs_get_rpc_context(nfs);
    READ3args a;
    memset(&a, 0, sizeof a);
    a.file.data.data_len = fhlen;
    a.file.data.data_val = (char *)fh;
    a.offset = 0;
    a.count = 200;
    memset(w, 0, sizeof *w);
    if (rpc_nfs3_read_async(rpc, read_cb, &a, w)) return -1;
    while (!w->done) {
        struct pollfd p = { .fd = rpc_get_fd(rpc), .events = rpc_which_events(rpc) };
        if (poll(&p, 1, 5000) <= 0) return -1;
        if (rpc_service(rpc, p.revents) < 0) return -1;
    }
    return w->status == RPC_STATUS_SUCCESS ? 0 : -1;
}

static const char persist_text[] = "handle must survive a restart\n";

static void save_handle(const char *file)
{
    struct nfsfh *fh = NULL;
    CHECK(nfs_creat(nfs, "/persist.txt", 0644, &fh) == 0, "creat: %s", nfs_get_error(nfs));
    if (!fh) return;
    CHECK(nfs_pwrite(nfs, fh, 0, sizeof persist_text - 1, persist_text) == (int)sizeof persist_text - 1, "write");
    struct libnfs_fh *h = (struct libnfs_fh *)nfs_get_fh(fh);
    CHECK(h && h->len > 0 && h->len <= 64, "handle length %d", h ? h->len : -1);
    FILE *f = fopen(file, "w");
    CHECK(f != NULL, "cannot write %s", file);
    if (f && h) {
        for (int i = 0; i < h->len; i++) fprintf(f, "%02x", (uint8_t)h->val[i]);
        fprintf(f, "\n");
        fclose(f);
    }
    nfs_close(nfs, fh);
}

static void check_handle(const char *file)
{
    uint8_t fh[64];
    uint32_t len = 0;
    FILE *f = fopen(file, "r");
    CHECK(f != NULL, "cannot read %s", file);
    if (!f) return;
    unsigned v;
    while (len < sizeof fh && fscanf(f, "%2x", &v) == 1) fh[len++] = (uint8_t)v;
    fclose(f);
    struct raw_wait w;
    CHECK(raw_read(fh, len, &w) == 0 && w.nfsstatus == NFS3_OK, "READ with the saved handle: status %u",
          w.nfsstatus);
    CHECK(w.len == sizeof persist_text - 1 && !memcmp(w.data, persist_text, w.len), "content via saved handle");
    printf("saved handle (%u bytes) still valid\n", len);
    /* forged: flip a MAC byte, then a kernel-handle byte, then the export id */
    int positions[3] = { (int)len - 1, 17, 7 };
    for (int i = 0; i < 3; i++) {
        uint8_t forged[64];
        memcpy(forged, fh, len);
        forged[positions[i]] ^= 0x5a;
        CHECK(raw_read(forged, len, &w) == 0 && (w.nfsstatus == NFS3ERR_BADHANDLE || w.nfsstatus == NFS3ERR_STALE),
              "forged handle (byte %d) gave status %u", positions[i], w.nfsstatus);
    }
    CHECK(raw_read(fh, len - 1, &w) == 0 && w.nfsstatus != NFS3_OK, "truncated handle accepted");
    nfs_unlink(nfs, "/persist.txt");
    /* the object is gone: the old handle is now stale */
    CHECK(raw_read(fh, len, &w) == 0 && w.nfsstatus == NFS3ERR_STALE, "handle of a removed file: status %u",
          w.nfsstatus);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: nfs_client_test URL basic|ro|quota BYTES|owner UID|mount-fail|"
                        "save-handle FILE|check-handle FILE|rm PATH|portmap PMPORT NFSPORT MOUNTPORT|live SERVERPID\n");
        return 2;
    }
    const char *mode = argv[2], *arg = argc > 3 ? argv[3] : NULL;
    nfs = nfs_init_context();
    struct nfs_url *url = nfs ? nfs_parse_url_dir(nfs, argv[1]) : NULL;
    if (!url) { fprintf(stderr, "bad url: %s\n", nfs ? nfs_get_error(nfs) : "no context"); return 2; }
    g_server = url->server;
    g_export = url->path;
    const char *mp = strstr(argv[1], "mountport=");
    g_mountport = mp ? atoi(mp + 10) : 0;
    if (!strcmp(mode, "portmap") && argc > 5) {
        test_portmap(atoi(argv[3]), atoi(argv[4]), atoi(argv[5]));
        printf("%s: %s (%d failures)\n", mode, failures ? "FAILED" : "ok", failures);
        return failures ? 1 : 0;
    }
    int mr = nfs_mount(nfs, url->server, url->path);
    if (!strcmp(mode, "mount-fail")) {
        CHECK(mr != 0, "mount succeeded but should have been refused");
        if (mr) printf("mount refused as expected: %s\n", nfs_get_error(nfs));
    } else if (mr) {
        fprintf(stderr, "FAIL mount: %s\n", nfs_get_error(nfs));
        return 1;
    } else if (!strcmp(mode, "basic")) test_basic();
    else if (!strcmp(mode, "ro")) test_ro();
    else if (!strcmp(mode, "quota") && arg) test_quota(strtoull(arg, NULL, 0));
    else if (!strcmp(mode, "owner") && arg) test_owner(atoi(arg));
    else if (!strcmp(mode, "suid")) test_suid();
    else if (!strcmp(mode, "live") && arg) test_live((pid_t)atoi(arg));
    else if (!strcmp(mode, "save-handle") && arg) save_handle(arg);
    else if (!strcmp(mode, "check-handle") && arg) check_handle(arg);
    else if (!strcmp(mode, "rm") && arg) CHECK(nfs_unlink(nfs, arg) == 0, "unlink %s: %s", arg, nfs_get_error(nfs));
    else { fprintf(stderr, "unknown mode %s\n", mode); return 2; }
    nfs_destroy_url(url);
    nfs_destroy_context(nfs);
    printf("%s: %s (%d failures)\n", mode, failures ? "FAILED" : "ok", failures);
    return failures ? 1 : 0;
}
