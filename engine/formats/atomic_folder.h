// Folders that appear complete or not at all. A checkpoint is written into
// a temporary sibling folder, every file fsynced, then renamed into place;
// a save that dies half-way leaves the temporary folder and never touches
// the folder being replaced:
//
//   std::string tmp = temporary_folder_for("runs/x/checkpoint_3");  // "runs/x/.checkpoint_3.tmp"
//   make_empty_folder(tmp);
//   ... write files into tmp, the manifest last ...
//   commit_folder(tmp, "runs/x/checkpoint_3");
#pragma once
#include <string>

namespace accel::formats {

// The temporary sibling of `folder`: same parent, a dotted name ending in
// ".tmp", so listings of finished checkpoints never match it.
std::string temporary_folder_for(const std::string& folder);

// Removes whatever `folder` holds (a stale temporary folder of a save that
// died) and creates it empty, parents included.
void make_empty_folder(const std::string& folder);

// fsyncs a file or a folder (a folder's fsync makes the names in it durable).
void fsync_path(const std::string& path);

// Makes `temporary` appear as `folder`: fsyncs `temporary`, then renames it
// into place. When `folder` exists it is swapped atomically
// (renameat2 RENAME_EXCHANGE) and the old contents removed afterwards, so at
// every instant `folder` is either the old complete checkpoint or the new
// one. File systems without the exchange get two renames, with the old
// contents kept as "<folder>.old" in between. Ends by fsyncing the parent.
void commit_folder(const std::string& temporary, const std::string& folder);

// Deletes a folder and everything in it; nothing happens when it is absent.
// It is first renamed to its dotted sibling "<parent>/.<name>.removing", so
// a removal cut short (a crash, a kill) leaves a name no listing of
// checkpoints matches, never "checkpoint_N" with half its files; such a
// leftover goes with the next removal of the same name.
void remove_folder(const std::string& folder);

}  // namespace accel::formats
