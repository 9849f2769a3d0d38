// A grouped artifact's back end (entry_step.hpp): entries found by demangled name, the PTX cut
// to them, ptxas -e through nvcc.
#include "builder/entry_step.hpp"

#include <cctype>
#include <filesystem>
#include <map>
#include <set>

#include "builder/build.hpp"
#include "builder/toolkit.hpp"
#include "format/fatbin.hpp"
#include "io/atomic_file.hpp"
#include "kiln/error.hpp"

namespace kiln::builder {
namespace fs = std::filesystem;

namespace {

bool ident_start(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == '$' || c == '%';
}
bool ident_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$';
}

// Every identifier in `text` outside comments and string literals.
std::set<std::string> identifiers(std::string_view text) {
  std::set<std::string> out;
  for (std::size_t i = 0; i < text.size();) {
    char c = text[i];
    if (c == '/' && i + 1 < text.size() && text[i + 1] == '/') {
      while (i < text.size() && text[i] != '\n') ++i;
    } else if (c == '"') {
      for (++i; i < text.size() && text[i] != '"'; ++i) {
      }
      ++i;
    } else if (ident_start(c)) {
      std::size_t b = i;
      for (++i; i < text.size() && ident_char(text[i]); ++i) {
      }
      out.insert(std::string(text.substr(b, i - b)));
    } else {
      ++i;
    }
  }
  return out;
}

// One top-level statement: its text (with the comment lines just before it) and its name.
struct Statement {
  std::string text;
  std::string name;  // "" when it declares nothing that can be referred to
};

[[noreturn]] void not_understood(const std::string& why) {
  throw Error(ErrorKind::Format, "cannot cut this PTX module to single entries: " + why);
}

// The name a statement declares: a function's after .entry/.func (and its return parameters),
// a variable's just before its '[', '=' or ';'.
std::string declared_name(std::string_view st) {
  std::string code;  // the statement without comment lines
  for (std::size_t i = 0; i < st.size();) {
    if (st[i] == '/' && i + 1 < st.size() && st[i + 1] == '/') {
      while (i < st.size() && st[i] != '\n') ++i;
    } else {
      code += st[i++];
    }
  }
  for (const char* kw : {".entry", ".func"}) {
    std::size_t at = code.find(kw);
    if (at == std::string::npos) continue;
    std::size_t i = at + std::string(kw).size();
    while (i < code.size() && std::isspace(static_cast<unsigned char>(code[i]))) ++i;
    if (i < code.size() && code[i] == '(') {  // return parameters
      int depth = 0;
      for (; i < code.size(); ++i) {
        if (code[i] == '(') ++depth;
        if (code[i] == ')' && --depth == 0) break;
      }
      ++i;
      while (i < code.size() && std::isspace(static_cast<unsigned char>(code[i]))) ++i;
    }
    std::size_t b = i;
    while (i < code.size() && ident_char(code[i])) ++i;
    return code.substr(b, i - b);
  }
  std::size_t end = code.find_first_of("[=;");
  if (end == std::string::npos) return "";
  std::size_t e = end;
  while (e > 0 && std::isspace(static_cast<unsigned char>(code[e - 1]))) --e;
  std::size_t b = e;
  while (b > 0 && ident_char(code[b - 1])) --b;
  return code.substr(b, e - b);
}

// Whether a statement so far declares a function: ".entry" or ".func" as a whole word.
bool is_function(const std::string& st) {
  for (const char* kw : {".entry", ".func"}) {
    std::size_t n = std::string(kw).size();
    for (std::size_t at = st.find(kw); at != std::string::npos; at = st.find(kw, at + 1))
      if (at + n >= st.size() || !ident_char(st[at + n])) return true;
  }
  return false;
}

}  // namespace

std::vector<std::string> module_entry_symbols(std::string_view ptx,
                                              const std::vector<std::string>& expressions,
                                              const std::string& what, const std::string& target) {
  std::vector<std::string> out;
  for (const auto& e : match_entries(expressions, format::ptx_entry_names(ptx),
                                     format::demangled_base_name, what, target))
    out.push_back(e.symbol);
  return out;
}

std::string ptx_slice(std::string_view ptx, const std::vector<std::string>& entries) {
  // The header: up to the end of the .address_size line.
  // Debug sections (-G, -lineinfo's .file/.loc data) tie statements together in ways this cut
  // does not follow: refused, never cut wrong.
  if (ptx.find(".section") != std::string_view::npos || ptx.find("\n.file") != std::string_view::npos)
    not_understood("it has debug information (.section / .file)");
  std::size_t addr = ptx.find(".address_size");
  if (ptx.find(".version") == std::string_view::npos || addr == std::string_view::npos)
    not_understood("it has no .version / .address_size header");
  std::size_t body = ptx.find('\n', addr);
  body = body == std::string_view::npos ? ptx.size() : body + 1;
  std::string header(ptx.substr(0, body));

  // The statements: a function ends at the '}' closing its body, anything else at a ';' outside
  // parentheses and braces; comment lines between statements go with the next one.
  std::vector<Statement> statements;
  std::string cur;
  int braces = 0, parens = 0;
  bool in_body = false;
  for (std::size_t i = body; i < ptx.size(); ++i) {
    char c = ptx[i];
    if (c == '/' && i + 1 < ptx.size() && ptx[i + 1] == '/') {
      std::size_t e = ptx.find('\n', i);
      e = e == std::string_view::npos ? ptx.size() : e;
      cur += ptx.substr(i, e - i);
      i = e - 1;
      continue;
    }
    if (c == '"') {
      std::size_t e = ptx.find('"', i + 1);
      if (e == std::string_view::npos) not_understood("an unterminated string");
      cur += ptx.substr(i, e - i + 1);
      i = e;
      continue;
    }
    cur += c;
    if (c == '(') ++parens;
    if (c == ')') --parens;
    if (c == '{') {
      if (braces == 0 && parens == 0 && is_function(cur)) in_body = true;
      ++braces;
    }
    if (c == '}' && --braces < 0) not_understood("an unbalanced '}'");
    bool ends = (c == ';' && braces == 0 && parens == 0 && !in_body) ||
                (c == '}' && braces == 0 && in_body);
    if (ends) {
      statements.push_back({cur, declared_name(cur)});
      cur.clear();
      in_body = false;
    }
  }
  // After the last statement only comments and blank lines may follow (they are dropped).
  bool unterminated = braces != 0 || parens != 0;
  for (std::size_t i = 0; i < cur.size() && !unterminated; ++i) {
    if (cur[i] == '/' && i + 1 < cur.size() && cur[i + 1] == '/') {
      while (i < cur.size() && cur[i] != '\n') ++i;
    } else if (!std::isspace(static_cast<unsigned char>(cur[i]))) {
      unterminated = true;
    }
  }
  if (unterminated) not_understood("it ends inside a statement");

  // A name may be declared more than once (a function's declaration, then its definition).
  std::map<std::string, std::vector<std::size_t>> by_name;
  for (std::size_t i = 0; i < statements.size(); ++i)
    if (!statements[i].name.empty()) by_name[statements[i].name].push_back(i);
  std::vector<bool> keep(statements.size(), false);
  std::vector<std::size_t> todo;
  for (const auto& e : entries) {
    auto it = by_name.find(e);
    if (it == by_name.end()) not_understood("entry " + e + " is not in it");
    todo.insert(todo.end(), it->second.begin(), it->second.end());
  }
  while (!todo.empty()) {
    std::size_t s = todo.back();
    todo.pop_back();
    if (keep[s]) continue;
    keep[s] = true;
    for (const auto& id : identifiers(statements[s].text)) {
      auto it = by_name.find(id);
      if (it == by_name.end()) continue;
      for (std::size_t d : it->second)
        if (!keep[d]) todo.push_back(d);
    }
  }
  std::string out = header;
  for (std::size_t i = 0; i < statements.size(); ++i)
    if (keep[i]) out += statements[i].text;
  out += "\n";
  return out;
}

namespace {

void run_tool(const std::vector<std::string>& argv, const std::string& what) {
  ProcessResult r = run_process(argv);
  if (r.exit_code != 0)
    throw Error(ErrorKind::Compile, r.output + (r.output.empty() || r.output.back() == '\n' ? "" : "\n") +
                                        what + " failed (exit code " +
                                        std::to_string(r.exit_code) + ")");
}

}  // namespace

void run_entry_step(const EntryStep& step) {
  std::string ptx = io::read_whole_file(step.pass_ptx, std::uint64_t{1} << 30);
  std::vector<std::string> symbols =
      module_entry_symbols(ptx, step.entries, step.out, step.target.str());
  std::vector<std::string> nvcc = {step.nvcc};
  nvcc.insert(nvcc.end(), step.nvcc_flags.begin(), step.nvcc_flags.end());
  if (step.target.kind == format::Target::Kind::Sass) {
    // One -Xptxas per entry: nvcc splits an -Xptxas value at commas.
    for (const auto& s : symbols) nvcc.insert(nvcc.end(), {"-Xptxas", "-e=" + s});
    nvcc.insert(nvcc.end(), {"-o", step.out, step.pass_ptx});
    run_tool(nvcc, "nvcc (ptxas -e) on " + step.pass_ptx);
    return;
  }
  // A PTX target: this URI's PTX alone, checked by ptxas before it is wrapped.
  fs::path out(step.out);
  fs::path slice = out;
  slice.replace_extension(".ptx");
  io::write_file_atomically(slice, ptx_slice(ptx, symbols));
  fs::path check = out;
  check.replace_extension(".check.cubin");
  std::string sm = step.target.str();
  sm.replace(0, std::string("compute_").size(), "sm_");
  run_tool({(fs::path(step.nvcc).parent_path() / "ptxas").string(), "-arch=" + sm, "-o",
            check.string(), slice.string()},
           "ptxas check of " + slice.string());
  std::error_code ec;
  fs::remove(check, ec);
  nvcc.insert(nvcc.end(), {"-o", step.out, slice.string()});
  run_tool(nvcc, "nvcc on " + slice.string());
}

}  // namespace kiln::builder
