#include "cortado/data/lmdb.hpp"

#include <lmdb.h>

#include <filesystem>
#include <map>
#include <mutex>
#include <system_error>

#include "cortado/common.hpp"

namespace cortado {

namespace {

namespace fs = std::filesystem;

[[noreturn]] void lmdb_fail(const std::string& path, const char* call, int rc) {
  fail("LMDB '", path, "': ", call, " failed: ", mdb_strerror(rc));
}

void check(int rc, const std::string& path, const char* call) {
  if (rc != MDB_SUCCESS) lmdb_fail(path, call, rc);
}

// An LMDB database is a directory; say so before LMDB answers with ENOTDIR.
void require_directory(const std::string& path) {
  std::error_code ec;
  const auto st = fs::status(path, ec);
  if (!fs::exists(st)) {
    fail("LMDB '", path, "': no such directory (", mdb_strerror(ENOENT), ")");
  }
  if (!fs::is_directory(st)) {
    fail("LMDB '", path, "': not a directory (an LMDB database is a directory holding data.mdb)");
  }
}

// The map size reserves address space, not disk: make it large enough for
// ImageNet-sized databases on 64-bit hosts.
constexpr size_t kMapSize = sizeof(size_t) >= 8 ? (size_t{1} << 40) : (size_t{1} << 30);

}  // namespace

// ---- LmdbCursor -------------------------------------------------------------

namespace {

// This process's read-only environment of `path`: opened by the first cursor,
// shared with the others, closed with the last.
std::shared_ptr<MDB_env> shared_env(const std::string& path) {
  static std::mutex mutex;
  static auto* open = new std::map<std::string, std::weak_ptr<MDB_env>>();  // never destroyed
  std::error_code ec;
  std::string key = fs::weakly_canonical(path, ec).string();
  if (ec) key = path;
  std::lock_guard<std::mutex> lock(mutex);
  if (std::shared_ptr<MDB_env> env = (*open)[key].lock()) return env;
  MDB_env* raw = nullptr;
  check(mdb_env_create(&raw), path, "mdb_env_create");
  // Map only what the file holds, not the writer's 1 TiB: many readers (and
  // processes with a limited address space) can then open it.
  const auto file_size = fs::file_size(fs::path(path) / "data.mdb", ec);
  int rc = MDB_SUCCESS;
  if (!ec && file_size > 0) rc = mdb_env_set_mapsize(raw, static_cast<size_t>(file_size));
  if (rc == MDB_SUCCESS) rc = mdb_env_open(raw, path.c_str(), MDB_RDONLY | MDB_NOTLS, 0664);
  if (rc != MDB_SUCCESS) {
    mdb_env_close(raw);
    if (rc == ENOENT) fail("LMDB '", path, "': no data.mdb in the directory (", mdb_strerror(rc), ")");
    lmdb_fail(path, "mdb_env_open", rc);
  }
  std::shared_ptr<MDB_env> env(raw, [](MDB_env* e) { mdb_env_close(e); });
  (*open)[key] = env;
  return env;
}

}  // namespace

LmdbCursor::LmdbCursor(const std::string& path, bool wrap_around)
    : path_(path), wrap_around_(wrap_around) {
  require_directory(path);
  env_ = shared_env(path_);
  int rc = mdb_txn_begin(env_.get(), nullptr, MDB_RDONLY, &txn_);
  if (rc == MDB_SUCCESS) {
    // LMDB: no two transactions of a process in mdb_dbi_open at once.
    static std::mutex dbi_mutex;
    std::lock_guard<std::mutex> lock(dbi_mutex);
    rc = mdb_dbi_open(txn_, nullptr, 0, &dbi_);
  }
  MDB_stat stat{};
  if (rc == MDB_SUCCESS) rc = mdb_stat(txn_, dbi_, &stat);
  if (rc == MDB_SUCCESS) rc = mdb_cursor_open(txn_, dbi_, &cursor_);
  if (rc != MDB_SUCCESS) {
    if (txn_) mdb_txn_abort(txn_);
    txn_ = nullptr;
    lmdb_fail(path_, "opening a read transaction", rc);
  }
  entries_ = static_cast<int64_t>(stat.ms_entries);
  SeekToFirst();
}

LmdbCursor::~LmdbCursor() {
  if (cursor_) mdb_cursor_close(cursor_);
  if (txn_) mdb_txn_abort(txn_);
}

bool LmdbCursor::Get(unsigned op, std::string_view key) {
  MDB_val k{key.size(), const_cast<char*>(key.data())}, v;
  const int rc = mdb_cursor_get(cursor_, &k, &v, static_cast<MDB_cursor_op>(op));
  if (rc == MDB_NOTFOUND) {
    valid_ = false;
    return false;
  }
  check(rc, path_, "mdb_cursor_get");
  key_ = std::string_view(static_cast<const char*>(k.mv_data), k.mv_size);
  value_ = std::string_view(static_cast<const char*>(v.mv_data), v.mv_size);
  valid_ = true;
  return true;
}

void LmdbCursor::SeekToFirst() { Get(MDB_FIRST); }

bool LmdbCursor::Seek(std::string_view key) { return Get(MDB_SET_KEY, key); }

void LmdbCursor::Next() {
  CORTADO_CHECK(valid_) << "LmdbCursor::Next on an invalid cursor";
  if (!Get(MDB_NEXT) && wrap_around_) SeekToFirst();
}

std::string_view LmdbCursor::key() const {
  CORTADO_CHECK(valid_);
  return key_;
}

std::string_view LmdbCursor::value() const {
  CORTADO_CHECK(valid_);
  return value_;
}

// ---- LmdbWriter -------------------------------------------------------------

LmdbWriter::LmdbWriter(const std::string& path, int commit_every)
    : path_(path), commit_every_(commit_every > 0 ? commit_every : 1) {
  std::error_code ec;
  fs::create_directories(path_, ec);
  if (ec) fail("LMDB '", path_, "': cannot create the directory: ", ec.message());
  require_directory(path_);
  // Where the address space is limited (ulimit -v, sanitizers), a 1 TiB map
  // fails with ENOMEM: retry with smaller maps down to 1 GiB.
  int rc = MDB_SUCCESS;
  for (size_t map = kMapSize;; map /= 4) {
    check(mdb_env_create(&env_), path_, "mdb_env_create");
    rc = mdb_env_set_mapsize(env_, map);
    if (rc == MDB_SUCCESS) rc = mdb_env_open(env_, path_.c_str(), 0, 0664);
    if (rc == MDB_SUCCESS) break;
    mdb_env_close(env_);
    env_ = nullptr;
    if (rc != ENOMEM || map / 4 < (size_t{1} << 30)) lmdb_fail(path_, "mdb_env_open", rc);
  }
}

LmdbWriter::~LmdbWriter() {
  try {
    Close();
  } catch (const Error& e) {
    LOG(ERROR) << e.what();
  }
}

void LmdbWriter::Begin() {
  check(mdb_txn_begin(env_, nullptr, 0, &txn_), path_, "mdb_txn_begin");
  const int rc = mdb_dbi_open(txn_, nullptr, 0, &dbi_);
  if (rc != MDB_SUCCESS) {
    mdb_txn_abort(txn_);
    txn_ = nullptr;
    lmdb_fail(path_, "mdb_dbi_open", rc);
  }
}

void LmdbWriter::Put(std::string_view key, std::string_view value) {
  if (!env_) fail("LMDB '", path_, "': Put after Close");
  if (!txn_) Begin();
  MDB_val k{key.size(), const_cast<char*>(key.data())};
  MDB_val v{value.size(), const_cast<char*>(value.data())};
  const int rc = mdb_put(txn_, dbi_, &k, &v, 0);
  if (rc != MDB_SUCCESS) {
    mdb_txn_abort(txn_);
    txn_ = nullptr;
    pending_ = 0;
    fail("LMDB '", path_, "': mdb_put of key '", key, "' failed: ", mdb_strerror(rc));
  }
  ++puts_;
  if (++pending_ >= commit_every_) Commit();
}

void LmdbWriter::Commit() {
  if (!txn_) return;
  MDB_txn* txn = txn_;
  txn_ = nullptr;
  pending_ = 0;
  check(mdb_txn_commit(txn), path_, "mdb_txn_commit");
}

void LmdbWriter::Close() {
  if (!env_) return;
  MDB_env* env = env_;
  try {
    Commit();
  } catch (...) {
    env_ = nullptr;
    mdb_env_close(env);
    throw;
  }
  env_ = nullptr;
  mdb_env_close(env);
}

}  // namespace cortado
