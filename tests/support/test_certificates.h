#pragma once

// Certificates for TLS tests, made by the openssl binary in a directory of the test's: a CA
// (authority) and leaves it signs with a CN and a subjectAltName (leaf). P-256 keys, valid 2
// days. Header-only; used by tls_test and cluster_security_test.

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "fault_support.h"

namespace txmq::test {

struct test_certificates {
  std::filesystem::path dir;
  [[nodiscard]] std::string path(const std::string& name) const { return (dir / name).string(); }

  // A leaf `name` (.pem/.key) signed by the CA `ca` (ca.pem/ca.key), with this CN and SAN
  // ("DNS:localhost,IP:127.0.0.1").
  void leaf(const std::string& name, const std::string& cn, const std::string& san, const std::string& ca = "ca") {
    const std::string d = dir.string();
    (void)shell_stdout("cd " + d + " && openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout " + name +
                       ".key -out " + name + ".csr -subj '/CN=" + cn + "' && printf 'subjectAltName=" + san +
                       "\\n' > " + name + ".ext && openssl x509 -req -in " + name + ".csr -CA " + ca + ".pem -CAkey " +
                       ca + ".key -CAcreateserial -out " + name + ".pem -days 2 -extfile " + name + ".ext 2>&1");
    ASSERT_TRUE(std::filesystem::exists(dir / (name + ".pem"))) << name;
  }
  void authority(const std::string& name, const std::string& cn) {
    (void)shell_stdout("cd " + dir.string() +
                       " && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout " + name +
                       ".key -out " + name + ".pem -days 2 -subj '/CN=" + cn + "' 2>&1");
    ASSERT_TRUE(std::filesystem::exists(dir / (name + ".pem"))) << name;
  }
};

}  // namespace txmq::test
