// LMDB wrapper: write and read back a real database, wrap-around, the errors
// for paths that are not LMDB databases; and the convert_mnist tool end to end
// on small IDX files.

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "cortado/common.hpp"
#include "cortado/data/lmdb.hpp"
#include "cortado.pb.h"
#include "temp_dir.hpp"
#include "test_paths.hpp"

namespace cortado {
namespace {

namespace fs = std::filesystem;

using test::TempDir;

std::string Key(int i) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%08d", i);
  return buf;
}

std::string Value(int i) { return "value-" + std::to_string(i * i) + std::string(i % 5, 'x'); }

TEST(LmdbTest, WriteAndReadBack) {
  TempDir dir;
  const std::string path = dir / "db";
  {
    LmdbWriter w(path, /*commit_every=*/7);
    // Written out of order: the cursor must return them in key order.
    for (int i = 24; i >= 0; --i) w.Put(Key(i), Value(i));
    EXPECT_EQ(w.puts(), 25);
    w.Close();
  }
  EXPECT_TRUE(fs::exists(fs::path(path) / "data.mdb"));
  LmdbCursor c(path);
  EXPECT_EQ(c.entries(), 25);
  ASSERT_TRUE(c.Valid());
  for (int i = 0; i < 25; ++i) {
    ASSERT_TRUE(c.Valid()) << i;
    EXPECT_EQ(c.key(), Key(i));
    EXPECT_EQ(c.value(), Value(i));
    c.Next();
  }
  EXPECT_FALSE(c.Valid());
  c.SeekToFirst();
  ASSERT_TRUE(c.Valid());
  EXPECT_EQ(c.key(), Key(0));
}

// The ranks of one process open their Data layers' database at the same
// moment, right after it was written (as a test or a conversion in the same
// process does). Every cursor must see every record: with one LMDB
// environment per cursor, same-process openers could reset each other's lock
// table and read the empty snapshot of the database's creation.
TEST(LmdbTest, CursorsOpenedAtOnceByThreadsSeeEveryRecord) {
  TempDir dir;
  const int kThreads = 4, kRounds = 60;
  for (int round = 0; round < kRounds; ++round) {
    const std::string path = dir / ("db" + std::to_string(round));
    {
      LmdbWriter w(path);
      for (int i = 0; i < 9; ++i) w.Put(Key(i), Value(i));
    }
    std::atomic<int> ready{0};
    std::vector<int64_t> entries(kThreads, -1);
    std::vector<std::string> last(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        ++ready;
        while (ready.load() < kThreads) {
        }
        LmdbCursor c(path);
        entries[static_cast<size_t>(t)] = c.entries();
        for (; c.Valid(); c.Next()) last[static_cast<size_t>(t)] = std::string(c.key());
      });
    }
    for (std::thread& th : threads) th.join();
    for (int t = 0; t < kThreads; ++t) {
      ASSERT_EQ(entries[static_cast<size_t>(t)], 9) << "round " << round << ", thread " << t;
      ASSERT_EQ(last[static_cast<size_t>(t)], Key(8)) << "round " << round << ", thread " << t;
    }
  }
}

TEST(LmdbTest, WrapAround) {
  TempDir dir;
  const std::string path = dir / "db";
  {
    LmdbWriter w(path);
    for (int i = 0; i < 3; ++i) w.Put(Key(i), Value(i));
  }  // the destructor commits
  LmdbCursor c(path, /*wrap_around=*/true);
  ASSERT_EQ(c.entries(), 3);
  std::vector<std::string> keys;
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE(c.Valid());
    keys.emplace_back(c.key());
    c.Next();
  }
  EXPECT_EQ(keys, (std::vector<std::string>{Key(0), Key(1), Key(2), Key(0), Key(1), Key(2), Key(0), Key(1)}));
}

TEST(LmdbTest, PutReplacesAndUncommittedPutsAreCommittedOnClose) {
  TempDir dir;
  const std::string path = dir / "db";
  LmdbWriter w(path, 100);
  w.Put("a", "1");
  w.Put("b", "2");
  w.Put("a", "3");
  w.Close();
  LmdbCursor c(path);
  EXPECT_EQ(c.entries(), 2);
  EXPECT_EQ(c.key(), "a");
  EXPECT_EQ(c.value(), "3");
  EXPECT_THROW(w.Put("c", "4"), Error);
}

TEST(LmdbTest, EmptyDatabase) {
  TempDir dir;
  const std::string path = dir / "db";
  LmdbWriter(path).Close();
  LmdbCursor c(path, true);
  EXPECT_EQ(c.entries(), 0);
  EXPECT_FALSE(c.Valid());
}

void ExpectErrorMentions(const std::string& path, const std::string& fragment) {
  try {
    LmdbCursor c(path);
    ADD_FAILURE() << "opening " << path << " did not throw";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find(fragment), std::string::npos) << msg;
  }
}

TEST(LmdbTest, MissingPathIsAnError) {
  TempDir dir;
  ExpectErrorMentions(dir / "no_such_lmdb", "No such file or directory");
}

TEST(LmdbTest, FileInsteadOfDirectoryIsAnError) {
  TempDir dir;
  std::ofstream(dir / "plain_file") << "hello";
  ExpectErrorMentions(dir / "plain_file", "not a directory");
}

TEST(LmdbTest, DirectoryWithoutDatabaseIsAnError) {
  TempDir dir;
  fs::create_directories(dir / "empty_dir");
  ExpectErrorMentions(dir / "empty_dir", "no data.mdb");
}

TEST(LmdbTest, GarbageDataFileIsAnError) {
  TempDir dir;
  fs::create_directories(dir / "garbage");
  {
    std::ofstream f(dir / "garbage/data.mdb", std::ios::binary);
    for (int i = 0; i < 3 * 4096; ++i) f.put(static_cast<char>((i * 131) & 0xff));
  }
  // LMDB's own message: "MDB_INVALID: File is not an LMDB file".
  ExpectErrorMentions(dir / "garbage", "not an LMDB file");
}

// ---- convert_mnist ------------------------------------------------------------

void WriteBigEndian(std::ofstream& f, uint32_t v) {
  const char b[4] = {char(v >> 24), char(v >> 16), char(v >> 8), char(v)};
  f.write(b, 4);
}

// IDX files of n 3x2 images; pixel j of image i is (i * 10 + j), label is 9 - i.
void WriteIdx(const std::string& images, const std::string& labels, int n, uint32_t image_magic = 0x803) {
  std::ofstream im(images, std::ios::binary), lb(labels, std::ios::binary);
  WriteBigEndian(im, image_magic);
  WriteBigEndian(im, n);
  WriteBigEndian(im, 3);
  WriteBigEndian(im, 2);
  WriteBigEndian(lb, 0x801);
  WriteBigEndian(lb, n);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < 6; ++j) im.put(static_cast<char>(i * 10 + j));
    lb.put(static_cast<char>(9 - i));
  }
}

int RunConvert(const std::string& args) {
  const std::string cmd = test::ConvertMnistPath() + " " + args + " 2>/dev/null";
  const int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

TEST(ConvertMnistTest, WritesDatumRecordsInOrder) {
  TempDir dir;
  WriteIdx(dir / "im", dir / "lb", 5);
  ASSERT_EQ(RunConvert(dir / "im" + " " + dir / "lb" + " " + dir / "out" + " --limit=4"), 0);
  LmdbCursor c(dir / "out");
  ASSERT_EQ(c.entries(), 4);
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(c.Valid());
    EXPECT_EQ(c.key(), Key(i));
    Datum d;
    ASSERT_TRUE(d.ParseFromArray(c.value().data(), static_cast<int>(c.value().size())));
    EXPECT_EQ(d.channels(), 1);
    EXPECT_EQ(d.height(), 3);
    EXPECT_EQ(d.width(), 2);
    EXPECT_EQ(d.label(), 9 - i);
    ASSERT_EQ(d.data().size(), 6u);
    for (int j = 0; j < 6; ++j) EXPECT_EQ(static_cast<uint8_t>(d.data()[j]), i * 10 + j);
    c.Next();
  }
}

TEST(ConvertMnistTest, RejectsBadMagicAndMissingFile) {
  TempDir dir;
  WriteIdx(dir / "im", dir / "lb", 3, /*image_magic=*/0x801);
  EXPECT_NE(RunConvert(dir / "im" + " " + dir / "lb" + " " + dir / "out"), 0);
  EXPECT_FALSE(fs::exists(dir / "out"));
  EXPECT_NE(RunConvert(dir / "missing" + " " + dir / "lb" + " " + dir / "out2"), 0);
}

}  // namespace
}  // namespace cortado
