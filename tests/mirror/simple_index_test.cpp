// The mirror's pip index, as pip reads it (packager/mirror/simple_index.hpp): the exact bytes of
// the PEP 503 pages and their PEP 691 JSON, escaping, the hashes in the links, and that the
// same wheels always give the same bytes.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "io/sha256.hpp"
#include "mirror/simple_index.hpp"

namespace kiln {
namespace {

using mirror::IndexedWheel;
using mirror::SimplePage;

const std::string kShaA(64, 'a');
const std::string kShaB(64, 'b');
const std::string kShaC(64, 'c');

std::map<std::string, std::string> by_path(const std::vector<SimplePage>& pages) {
  std::map<std::string, std::string> m;
  for (const auto& p : pages) m[p.path] = p.bytes;
  return m;
}

TEST(SimpleIndex, ProjectNamesAreTheWheelsDistributionsNormalised) {
  EXPECT_EQ(mirror::simple_project_name("kiln_kernels_cu13_sm90a-0.1.0-py3-none-any.whl"),
            "kiln-kernels-cu13-sm90a");
  EXPECT_EQ(mirror::simple_project_name("kiln-0.1.0-cp312-abi3-manylinux_2_28_x86_64.whl"), "kiln");
  EXPECT_EQ(mirror::simple_project_name("Acme__Kernels.x-1.0-py3-none-any.whl"), "acme-kernels-x");
}

TEST(SimpleIndex, PagesAreTheExactBytesPipReadsSortedWithHashesAndMetadata) {
  const std::string meta_pkg =
      "Metadata-Version: 2.1\nName: kiln-kernels\nVersion: 0.1.0\nRequires-Python: >=3.9\n\nbody\n";
  const std::string meta_tgt = "Metadata-Version: 2.1\nName: kiln-kernels-cu13-sm90a\n";
  // Given out of order: the pages sort projects and files by name.
  std::vector<IndexedWheel> wheels = {
      {"kiln_kernels_cu13_sm90a-0.1.0-py3-none-any.whl", kShaC, meta_tgt},
      {"kiln_kernels-0.2.0-py3-none-any.whl", kShaB, meta_pkg},
      {"kiln_kernels-0.1.0-py3-none-any.whl", kShaA, meta_pkg},
  };
  auto pages = mirror::simple_index_pages(wheels);
  ASSERT_EQ(pages.size(), 6u);
  EXPECT_EQ(pages[0].path, "simple/index.html");
  EXPECT_EQ(pages[1].path, "simple/index.json");
  auto m = by_path(pages);
  EXPECT_EQ(m["simple/index.html"],
            "<!DOCTYPE html>\n<html>\n  <head>\n"
            "    <meta name=\"pypi:repository-version\" content=\"1.0\">\n"
            "    <title>Simple index</title>\n  </head>\n  <body>\n"
            "    <a href=\"kiln-kernels/\">kiln-kernels</a><br>\n"
            "    <a href=\"kiln-kernels-cu13-sm90a/\">kiln-kernels-cu13-sm90a</a><br>\n"
            "  </body>\n</html>\n");
  EXPECT_EQ(m["simple/index.json"],
            "{\n  \"meta\": {\"api-version\": \"1.0\"},\n  \"projects\": [\n"
            "    {\"name\": \"kiln-kernels\"},\n    {\"name\": \"kiln-kernels-cu13-sm90a\"}\n  ]\n}\n");
  const std::string mp = io::sha256_hex(meta_pkg);
  EXPECT_EQ(m["simple/kiln-kernels/index.html"],
            "<!DOCTYPE html>\n<html>\n  <head>\n"
            "    <meta name=\"pypi:repository-version\" content=\"1.0\">\n"
            "    <title>Links for kiln-kernels</title>\n  </head>\n  <body>\n"
            "    <h1>Links for kiln-kernels</h1>\n"
            "    <a href=\"../../kiln_kernels-0.1.0-py3-none-any.whl#sha256=" + kShaA +
                "\" data-requires-python=\"&gt;=3.9\" data-dist-info-metadata=\"sha256=" + mp +
                "\" data-core-metadata=\"sha256=" + mp + "\">kiln_kernels-0.1.0-py3-none-any.whl</a><br>\n"
            "    <a href=\"../../kiln_kernels-0.2.0-py3-none-any.whl#sha256=" + kShaB +
                "\" data-requires-python=\"&gt;=3.9\" data-dist-info-metadata=\"sha256=" + mp +
                "\" data-core-metadata=\"sha256=" + mp + "\">kiln_kernels-0.2.0-py3-none-any.whl</a><br>\n"
            "  </body>\n</html>\n");
  const std::string mt = io::sha256_hex(meta_tgt);
  EXPECT_EQ(m["simple/kiln-kernels-cu13-sm90a/index.json"],
            "{\n  \"meta\": {\"api-version\": \"1.0\"},\n  \"name\": \"kiln-kernels-cu13-sm90a\",\n"
            "  \"files\": [\n"
            "    {\"filename\": \"kiln_kernels_cu13_sm90a-0.1.0-py3-none-any.whl\", "
            "\"url\": \"../../kiln_kernels_cu13_sm90a-0.1.0-py3-none-any.whl\", "
            "\"hashes\": {\"sha256\": \"" + kShaC + "\"}, \"core-metadata\": {\"sha256\": \"" + mt +
                "\"}, \"dist-info-metadata\": {\"sha256\": \"" + mt + "\"}}\n  ]\n}\n");
  // The JSON parses, and says what the HTML says.
  auto j = nlohmann::json::parse(m["simple/kiln-kernels/index.json"]);
  EXPECT_EQ(j["name"], "kiln-kernels");
  ASSERT_EQ(j["files"].size(), 2u);
  EXPECT_EQ(j["files"][1]["hashes"]["sha256"], kShaB);
  EXPECT_EQ(j["files"][1]["requires-python"], ">=3.9");

  // Reproducible: the same wheels in any order give the same bytes.
  std::vector<IndexedWheel> again = {wheels[2], wheels[0], wheels[1]};
  EXPECT_EQ(by_path(mirror::simple_index_pages(again)), m);
}

TEST(SimpleIndex, NamesAndValuesAreEscapedInHtmlPercentEncodedInLinksAndJsonEscaped) {
  const std::string meta = "Name: kiln\nRequires-Python: >=3.9,<4 \"x\" & 'y'\n";
  auto m = by_path(mirror::simple_index_pages(
      {{"kiln-0.1.0-cp312-abi3-a&b <c>\"d\".whl", kShaA, meta}}));
  const std::string& html = m["simple/kiln/index.html"];
  EXPECT_NE(html.find("href=\"../../kiln-0.1.0-cp312-abi3-a%26b%20%3Cc%3E%22d%22.whl#sha256=" + kShaA +
                      "\""),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("data-requires-python=\"&gt;=3.9,&lt;4 &quot;x&quot; &amp; &#39;y&#39;\""),
            std::string::npos)
      << html;
  EXPECT_NE(html.find(">kiln-0.1.0-cp312-abi3-a&amp;b &lt;c&gt;&quot;d&quot;.whl</a>"),
            std::string::npos)
      << html;
  auto j = nlohmann::json::parse(m["simple/kiln/index.json"]);
  EXPECT_EQ(j["files"][0]["filename"], "kiln-0.1.0-cp312-abi3-a&b <c>\"d\".whl");
  EXPECT_EQ(j["files"][0]["requires-python"], ">=3.9,<4 \"x\" & 'y'");
  EXPECT_EQ(j["files"][0]["url"], "../../kiln-0.1.0-cp312-abi3-a%26b%20%3Cc%3E%22d%22.whl");
}

TEST(SimpleIndex, NoWheelsGiveAnEmptyRootAndNoProjectPage) {
  auto m = by_path(mirror::simple_index_pages({}));
  EXPECT_EQ(m.size(), 2u);
  EXPECT_EQ(m["simple/index.json"],
            "{\n  \"meta\": {\"api-version\": \"1.0\"},\n  \"projects\": []\n}\n");
}

}  // namespace
}  // namespace kiln
