// The one parser of Swordfish's boolean environment knobs on the C++ side
// (swordfish_backend/envs.py is the Python one; both accept the same
// spellings: trimmed, any case). Read when asked, never cached: a test or a
// user may set a knob between two calls and is obeyed at the next one.
//   off: unset, "", 0, false, off, no      on: 1, true, on, yes
// Plain C++, host only.
#pragma once

#include <cctype>
#include <cstdlib>
#include <string>

namespace swordfish {
namespace env {

enum class Flag { kOff, kOn, kUnrecognised };

// The raw value of `name`, or nullptr when unset.
inline const char* raw(const char* name) { return std::getenv(name); }

// `name` parsed now. A strict reader (SWORDFISH_DETERMINISTIC) rejects
// kUnrecognised; a lenient one (a debug switch never fails a GEMM) reads it as on.
inline Flag flag(const char* name) {
  const char* env = raw(name);
  if (env == nullptr) return Flag::kOff;
  std::string v(env);
  const size_t first = v.find_first_not_of(" \t\n\r"), last = v.find_last_not_of(" \t\n\r");
  v = first == std::string::npos ? std::string() : v.substr(first, last - first + 1);
  for (char& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (v.empty() || v == "0" || v == "false" || v == "off" || v == "no") return Flag::kOff;
  if (v == "1" || v == "true" || v == "on" || v == "yes") return Flag::kOn;
  return Flag::kUnrecognised;
}

// A lenient knob: anything but an off spelling is on.
inline bool lenient(const char* name) { return flag(name) != Flag::kOff; }

}  // namespace env
}  // namespace swordfish
