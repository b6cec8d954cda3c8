// SHA-256 and HMAC-SHA256 (runtime/src/comm/gate/hmac_sha256.h) against Python's hashlib and hmac,
// computed in the same run over the same bytes, plus the published FIPS 180-2 and RFC 4231 vectors.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "comm/gate/hmac_sha256.h"

namespace {

using acc::detail::hmac_sha256;
using acc::detail::Sha256;
using acc::detail::sha256;
using acc::detail::to_hex;

std::string random_bytes(std::mt19937& rng, std::size_t n) {
  std::string bytes(n, '\0');
  std::uniform_int_distribution<int> byte(0, 255);
  for (char& c : bytes) c = static_cast<char>(byte(rng));
  return bytes;
}

// Python's sha256(message) and hmac(key, message) hex digests for each case, one "sha hmac" line
// per case; the cases go through a file as hex (1 MB messages do not fit a command line).
std::vector<std::pair<std::string, std::string>> python_digests(
    const std::vector<std::pair<std::string, std::string>>& cases) {
  char dir_template[] = "/tmp/acc-hmac-XXXXXX";
  const std::string dir = mkdtemp(dir_template);
  const std::string input = dir + "/cases.txt";
  {
    std::ofstream out(input);
    for (const auto& [key, message] : cases) out << to_hex(key) << ' ' << to_hex(message) << '\n';
  }
  const std::string script =
      "import hashlib, hmac, sys\n"
      "for line in open(sys.argv[1]):\n"
      "    key, message = (bytes.fromhex(field) for field in line.split(' '))\n"
      "    print(hashlib.sha256(message).hexdigest(), hmac.new(key, message, hashlib.sha256).hexdigest())\n";
  const std::string script_path = dir + "/digests.py";
  std::ofstream(script_path) << script;
  std::string output;
  if (FILE* pipe = popen((std::string(ACC_PYTHON) + " " + script_path + " " + input + " 2>&1").c_str(), "r")) {
    char buffer[4096];
    std::size_t n;
    while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) output.append(buffer, n);
    pclose(pipe);
  }
  std::filesystem::remove(input);
  std::filesystem::remove(script_path);
  std::filesystem::remove(dir);

  std::vector<std::pair<std::string, std::string>> digests;
  std::istringstream lines(output);
  std::string sha, mac;
  while (lines >> sha >> mac) digests.emplace_back(sha, mac);
  EXPECT_EQ(digests.size(), cases.size()) << "Python's output:\n" << output;
  return digests;
}

TEST(HmacSha256, MatchesPythonAcrossBlockBoundaries) {
  std::mt19937 rng(20261125);
  // Message lengths around SHA-256's padding boundaries (55/56: the length fits the last block or
  // not; 63/64/65: a whole block), and 1 MB; key lengths around HMAC's block (64: used as is, 65:
  // hashed first), and far longer than a block.
  const std::vector<std::size_t> message_sizes = {0, 1, 3, 55, 56, 57, 63, 64, 65, 119, 120, 128, 1000, 1 << 20};
  const std::vector<std::size_t> key_sizes = {0, 1, 32, 63, 64, 65, 100, 1000};
  std::vector<std::pair<std::string, std::string>> cases;
  for (std::size_t m : message_sizes) cases.emplace_back(random_bytes(rng, 32), random_bytes(rng, m));
  for (std::size_t k : key_sizes) cases.emplace_back(random_bytes(rng, k), random_bytes(rng, 77));
  cases.emplace_back("", "");

  const auto expected = python_digests(cases);
  ASSERT_EQ(expected.size(), cases.size());
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto& [key, message] = cases[i];
    SCOPED_TRACE("key " + std::to_string(key.size()) + " bytes, message " + std::to_string(message.size()) + " bytes");
    EXPECT_EQ(to_hex(sha256(message)), expected[i].first);
    EXPECT_EQ(to_hex(hmac_sha256(key, message)), expected[i].second);
  }
}

TEST(HmacSha256, IncrementalUpdatesAndPartsEqualOneShot) {
  // The gate MACs a label and two nonces as parts; split points must not change the digest.
  std::mt19937 rng(7);
  const std::string message = random_bytes(rng, 300);
  for (std::size_t split : {0, 1, 55, 64, 65, 128, 299, 300}) {
    Sha256 hash;
    hash.update(std::string_view(message).substr(0, split));
    hash.update(std::string_view(message).substr(split));
    EXPECT_EQ(hash.finish(), sha256(message)) << "split at " << split;
    EXPECT_EQ(hmac_sha256("key", {std::string_view(message).substr(0, split), std::string_view(message).substr(split)}),
              hmac_sha256("key", message))
        << "split at " << split;
  }
}

TEST(HmacSha256, PublishedVectors) {
  // FIPS 180-2, appendix B.1 and B.2.
  EXPECT_EQ(to_hex(sha256("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(to_hex(sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  // RFC 4231, test cases 2 and 6 (a key longer than a block).
  EXPECT_EQ(to_hex(hmac_sha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_EQ(to_hex(hmac_sha256(std::string(131, '\xaa'), "Test Using Larger Than Block-Size Key - Hash Key First")),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST(HmacSha256, ConstantTimeEqualComparesEveryByte) {
  const uint8_t a[4] = {1, 2, 3, 4};
  const uint8_t b[4] = {1, 2, 3, 5};
  const uint8_t c[4] = {0, 2, 3, 4};
  EXPECT_TRUE(acc::detail::constant_time_equal(a, a, 4));
  EXPECT_FALSE(acc::detail::constant_time_equal(a, b, 4));
  EXPECT_FALSE(acc::detail::constant_time_equal(a, c, 4));
  EXPECT_TRUE(acc::detail::constant_time_equal(a, b, 3));
}

}  // namespace
