// "Did you mean": the known name closest to a misspelt one.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace accel {

// Edits (insertions, deletions, substitutions, swaps of neighbours) that turn
// `a` into `b`; '-' and '_' count as the same letter, as do upper and lower case.
size_t edit_distance(std::string_view a, std::string_view b);

// The candidate nearest to `word`, when it is near enough to be a slip of
// the keyboard (about one edit per four letters); the first of equals wins.
std::optional<std::string> nearest_name(std::string_view word,
                                        const std::vector<std::string>& candidates);

// " (did you mean 'x'?)", or "" when nothing is near.
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace accel
