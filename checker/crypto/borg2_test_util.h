// Test-only helpers for the borg 2 crypto tests: the fixture vectors files
// (shared/fixtures/borg2b5/expected/*.vectors.txt) and a minimal walk of a b5 segment file to
// fetch one object's payload. Deliberately independent of checker/repo, so the crypto tests
// check the crypto against the fixtures and nothing else.
//
// Thread contract: test code, single-threaded.
#pragma once

#include <cstdint>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "checker/base/bytes.h"

namespace borgcheck::crypto::testutil {

using Vec = std::vector<uint8_t>;

inline std::string SharedDir() { return BORGCHECK_SHARED_DIR; }
inline std::string B5Dir() { return SharedDir() + "/fixtures/borg2b5"; }

inline Vec Unhex(const std::string& hex) {
  std::string out;
  if (!FromHex(hex, out)) return {};
  return Vec(out.begin(), out.end());
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct EnvelopeVector {
  uint8_t type = 0;
  size_t len = 0;
  Vec head;         // the first up-to-64 bytes of the envelope
  Vec session_id;   // AEAD only
  uint64_t iv = 0;
  Vec nonce;
  Vec session_key;
  Vec tag;
  Vec aad;
  Vec meta_plain;              // meta envelope: decrypted msgpack
  std::optional<size_t> data_len;  // data envelope: decrypted length and its SHA-256
  Vec data_sha256;
};

struct ObjectVector {
  Vec id;
  size_t len = 0;  // PUT2 payload length
  EnvelopeVector meta, data;
};

struct RepoVectors {
  std::map<std::string, std::string> kv;  // repo_id, crypt_key, id_key, chunk_seed (hex / text)
  std::vector<ObjectVector> objects;
};

// Parses "VECTOR key=value ..." lines; see the README of the fixtures.
inline RepoVectors ParseVectors(const std::string& path) {
  RepoVectors rv;
  std::ifstream f(path);
  std::string line;
  EnvelopeVector* env = nullptr;
  while (std::getline(f, line)) {
    if (line.rfind("VECTOR", 0) != 0) continue;
    std::istringstream in(line.substr(6));
    std::vector<std::string> tok;
    for (std::string t; in >> t;) tok.push_back(t);
    if (tok.empty()) continue;
    auto value = [&](const std::string& key) -> std::string {
      for (const std::string& t : tok) {
        if (t.rfind(key + "=", 0) == 0) return t.substr(key.size() + 1);
      }
      return "";
    };
    if (tok[0] == "object") {
      rv.objects.emplace_back();
      rv.objects.back().id = Unhex(value("id"));
      rv.objects.back().len = std::stoul(value("len"));
      env = nullptr;
      continue;
    }
    if ((tok[0] == "meta" || tok[0] == "data") && tok.size() > 1 && tok[1] == "envelope") {
      env = tok[0] == "meta" ? &rv.objects.back().meta : &rv.objects.back().data;
      env->type = uint8_t(std::stoul(value("type"), nullptr, 16));
      env->len = std::stoul(value("len"));
      env->head = Unhex(value("head"));
      continue;
    }
    if (env == nullptr) {
      size_t eq = tok[0].find('=');
      if (eq != std::string::npos) rv.kv[tok[0].substr(0, eq)] = tok[0].substr(eq + 1);
      continue;
    }
    if (tok[0].rfind("sessionid=", 0) == 0) {
      env->session_id = Unhex(value("sessionid"));
      env->iv = std::stoull(value("iv"));
      env->nonce = Unhex(value("nonce"));
    } else if (tok[0].rfind("session_key=", 0) == 0) {
      env->session_key = Unhex(value("session_key"));
      env->tag = Unhex(value("tag"));
      env->aad = Unhex(value("aad=id||header"));
    } else if (tok[0].rfind("plaintext(msgpack)=", 0) == 0) {
      env->meta_plain = Unhex(value("plaintext(msgpack)"));
    } else if (tok[0] == "plaintext(compressed)") {
      env->data_len = std::stoul(value("len"));
      env->data_sha256 = Unhex(value("sha256"));
    }
  }
  return rv;
}

// The payload of the PUT2 (tag 3) entry storing `id` in a b5 segment file, or nullopt.
inline std::optional<Vec> FindPut2Payload(const std::string& segment_path, const Vec& id) {
  std::string seg = ReadFile(segment_path);
  const auto* p = reinterpret_cast<const uint8_t*>(seg.data());
  size_t off = 8;
  while (off + 9 <= seg.size()) {
    uint32_t size = LoadLE32(p + off + 4);
    uint8_t tag = p[off + 8];
    if (size < 9 || off + size > seg.size()) return std::nullopt;
    if (tag == 3 && size >= 49 && Vec(p + off + 9, p + off + 41) == id) {
      return Vec(p + off + 49, p + off + size);
    }
    off += size;
  }
  return std::nullopt;
}

// The repository's `key = ...` config value, whitespace removed.
inline std::string ConfigKey(const std::string& repo_dir) {
  std::istringstream in(ReadFile(repo_dir + "/config"));
  std::string line, key;
  bool in_key = false;
  while (std::getline(in, line)) {
    if (line.rfind("key = ", 0) == 0) {
      key = line.substr(6);
      in_key = true;
    } else if (in_key && !line.empty() && (line[0] == '\t' || line[0] == ' ')) {
      key += line;
    } else {
      in_key = false;
    }
  }
  std::string clean;
  for (char c : key) if (c != ' ' && c != '\t' && c != '\r') clean.push_back(c);
  return clean;
}

}  // namespace borgcheck::crypto::testutil
