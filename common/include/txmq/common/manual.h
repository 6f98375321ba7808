#pragma once

// Man pages and bash completion written from the option tables the programs parse with, so that
// --help, the man page and the completion can never disagree (issue #16, item 5). Each program
// describes itself as a `page` (its commands, each with the options of its
// boost::program_options table, and its global options); the build runs the program with
// --man-page and --bash-completion and installs what they print.
//
// The renderers work on plain structs so that txmq::common does not link Boost.Program_options;
// options_of() is a template, instantiated by the programs, which link it already.
//
// Thread-safety: pure functions.

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace txmq::common::manual {

struct option {
  std::string short_name;  // "-h", or empty
  std::string long_name;   // "help" (without the dashes)
  std::string value;       // "HOST:PORT", "[=true|false]" (optional value), or empty for a switch
  std::string default_value;  // "1s", or empty
  std::string help;
  // The next word is the option's value (completion must not take it for a command).
  [[nodiscard]] bool takes_value() const { return !value.empty() && value.front() != '['; }
};

struct command {
  std::string name;      // "topic create"
  std::string synopsis;  // "topic create NAME [--partitions N]", after the program name
  std::string summary;   // one line
  std::vector<option> options;
};

struct page {
  std::string program;                 // "txmq"
  std::string summary;                 // the NAME line: "administer and inspect a txmq broker"
  std::vector<std::string> synopsis;   // after the program name, one line each
  std::string description;             // paragraphs separated by blank lines; plain text
  std::vector<command> commands;       // empty for a program without commands
  std::string options_title = "OPTIONS";
  std::vector<option> options;         // valid before or after any command
  // Further sections in order ("EXIT STATUS", "ENVIRONMENT", "FILES", "SEE ALSO"): plain text,
  // paragraphs separated by blank lines.
  std::vector<std::pair<std::string, std::string>> sections;
  std::string version;                 // shown in the page footer
};

// The page in man(7) roff: `man -l` renders it, `groff -ww` warns about nothing.
[[nodiscard]] std::string to_roff(const page& p);

// A bash completion script for the program: completes command words (one or two: "topic
// create"), the options of the command given (and the global ones), and file names after options
// whose value is a FILE, DIR or PATH. It needs nothing from the bash-completion package.
[[nodiscard]] std::string to_bash_completion(const page& p);

// Escapes text for roff (backslashes, hyphens, leading dots and quotes); exposed for tests.
[[nodiscard]] std::string roff_escape(std::string_view text);

// The options of a boost::program_options::options_description, in its order. A template so
// that this library needs no Program_options; `Desc` is po::options_description.
template <class Desc>
[[nodiscard]] std::vector<option> options_of(const Desc& desc) {
  std::vector<option> out;
  for (const auto& d : desc.options()) {
    option o;
    o.long_name = d->long_name();
    const std::string display = d->format_name();  // "-h [ --help ]" or "--broker"
    if (display.size() >= 2 && display[0] == '-' && display[1] != '-') o.short_name = display.substr(0, 2);
    std::string value = d->format_parameter();  // "arg (=1s)", "HOST:PORT", "[=N(=1)] (=0)", ""
    // program_options appends defaults as "(=x)": keep the last as the default, drop them all.
    for (auto at = value.find("(="); at != std::string::npos; at = value.find("(=")) {
      const auto end = value.find(')', at);
      if (end == std::string::npos) break;
      if (at == 0 || value[at - 1] == ' ') o.default_value = value.substr(at + 2, end - at - 2);
      std::size_t from = at;
      if (from > 0 && value[from - 1] == ' ') --from;
      value.erase(from, end + 1 - from);
    }
    if (value == "arg") value = "VALUE";
    o.value = value;
    o.help = d->description();
    out.push_back(std::move(o));
  }
  return out;
}

}  // namespace txmq::common::manual
