#pragma once
// A small LMDB wrapper: a read-only cursor and a batched writer.
//
// Layout: an LMDB database is a directory holding data.mdb and lock.mdb, as
// Caffe's convert_imageset writes it (MDB_NOSUBDIR is not used).
//
// Contract:
// - Opening a path that does not exist, is not a directory, or does not hold
//   an LMDB database throws cortado::Error naming the path and LMDB's message.
// - LmdbCursor reads entries in key order. It holds one read transaction for
//   its lifetime (a snapshot: puts made after it opened are not seen). It is
//   not tied to the thread that opened it (MDB_NOTLS), but one cursor must be
//   used by one thread at a time.
// - With wrap_around, Next() on the last entry goes back to the first, so a
//   non-empty database never runs out (how a data layer reads epoch after
//   epoch). Without it, Next() on the last entry leaves the cursor not Valid().
// - key() and value() point into LMDB's memory map; they stay valid until the
//   next Next()/SeekToFirst() or the cursor's destruction.
// - LmdbWriter creates the directory if needed and commits a transaction every
//   `commit_every` puts; Close() commits the rest. The destructor commits too
//   but swallows errors (call Close() to see them). The map size is 1 TiB on
//   64-bit hosts (LMDB reserves address space, not disk); where the address
//   space is limited it falls back to smaller maps, down to 1 GiB.
// - A cursor maps only the size of data.mdb, whatever map size the writer used.
// - The cursors of one database in one process share one LMDB environment,
//   as LMDB requires (an environment opened twice in one process breaks its
//   locks: two ranks of one process opening a database at once could read
//   an empty snapshot). Each cursor has its own read transaction.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

struct MDB_env;
struct MDB_txn;
struct MDB_cursor;

namespace cortado {

class LmdbCursor {
 public:
  explicit LmdbCursor(const std::string& path, bool wrap_around = false);
  ~LmdbCursor();
  LmdbCursor(const LmdbCursor&) = delete;
  LmdbCursor& operator=(const LmdbCursor&) = delete;

  void SeekToFirst();
  void Next();
  /// Positions the cursor on `key` (a B-tree lookup); false, and not
  /// Valid(), when the database has no such key.
  bool Seek(std::string_view key);
  bool Valid() const { return valid_; }
  std::string_view key() const;
  std::string_view value() const;

  /// Number of entries in the database (in this cursor's snapshot).
  int64_t entries() const { return entries_; }
  const std::string& path() const { return path_; }
  bool wrap_around() const { return wrap_around_; }

 private:
  // unsigned: MDB_cursor_op without including lmdb.h; `key` for the ops that take one.
  bool Get(unsigned op, std::string_view key = {});

  std::string path_;
  bool wrap_around_;
  std::shared_ptr<MDB_env> env_;  // shared by this process's cursors of path_
  MDB_txn* txn_ = nullptr;
  MDB_cursor* cursor_ = nullptr;
  unsigned dbi_ = 0;
  int64_t entries_ = 0;
  bool valid_ = false;
  std::string_view key_, value_;
};

class LmdbWriter {
 public:
  explicit LmdbWriter(const std::string& path, int commit_every = 1000);
  ~LmdbWriter();
  LmdbWriter(const LmdbWriter&) = delete;
  LmdbWriter& operator=(const LmdbWriter&) = delete;

  /// Inserts or replaces `key`.
  void Put(std::string_view key, std::string_view value);
  /// Commits the open transaction (if any puts are pending).
  void Commit();
  /// Commits and closes; later Puts are an error.
  void Close();
  int64_t puts() const { return puts_; }

 private:
  void Begin();

  std::string path_;
  int commit_every_;
  MDB_env* env_ = nullptr;
  MDB_txn* txn_ = nullptr;
  unsigned dbi_ = 0;
  int pending_ = 0;
  int64_t puts_ = 0;
};

}  // namespace cortado
