#include "engine/tokenizers/sentencepiece_module/sentencepiece_module.h"

#include <sentencepiece_processor.h>

#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

namespace {

using Processor = sentencepiece::SentencePieceProcessor;

void set_error(char* error, size_t error_size, const std::string& message) {
  if (error_size == 0) return;
  const size_t n = message.size() < error_size - 1 ? message.size() : error_size - 1;
  std::memcpy(error, message.data(), n);
  error[n] = '\0';
}

Processor& processor_at(void* p) { return *static_cast<Processor*>(p); }

}  // namespace

extern "C" {

void* accel_spm_load(const char* data, size_t size, char* error, size_t error_size) {
  try {
    auto processor = std::make_unique<Processor>();
    const auto status = processor->LoadFromSerializedProto(std::string_view(data, size));
    if (!status.ok()) {
      set_error(error, error_size, status.ToString());
      return nullptr;
    }
    return processor.release();
  } catch (const std::exception& e) {
    set_error(error, error_size, e.what());
  } catch (...) {
    set_error(error, error_size, "SentencePiece failed");
  }
  return nullptr;
}

void accel_spm_free(void* processor) { delete static_cast<Processor*>(processor); }

int accel_spm_encode(void* processor, const char* text, size_t size, accel_spm_ids_sink sink, void* context,
                     char* error, size_t error_size) {
  try {
    std::vector<int> ids;
    const auto status = processor_at(processor).Encode(std::string_view(text, size), &ids);
    if (!status.ok()) {
      set_error(error, error_size, status.ToString());
      return -1;
    }
    sink(context, ids.data(), ids.size());
    return 0;
  } catch (const std::exception& e) {
    set_error(error, error_size, e.what());
  } catch (...) {
    set_error(error, error_size, "SentencePiece failed");
  }
  return -1;
}

int accel_spm_decode(void* processor, const int* ids, size_t count, accel_spm_text_sink sink, void* context,
                     char* error, size_t error_size) {
  try {
    std::string text;
    const auto status = processor_at(processor).Decode(std::vector<int>(ids, ids + count), &text);
    if (!status.ok()) {
      set_error(error, error_size, status.ToString());
      return -1;
    }
    sink(context, text.data(), text.size());
    return 0;
  } catch (const std::exception& e) {
    set_error(error, error_size, e.what());
  } catch (...) {
    set_error(error, error_size, "SentencePiece failed");
  }
  return -1;
}

int accel_spm_piece_count(void* processor) { return processor_at(processor).GetPieceSize(); }

void accel_spm_piece(void* processor, int id, accel_spm_text_sink sink, void* context) {
  const std::string& piece = processor_at(processor).IdToPiece(id);
  sink(context, piece.data(), piece.size());
}

int accel_spm_piece_kind(void* processor, int id) {
  const Processor& p = processor_at(processor);
  if (p.IsUnknown(id)) return 1;
  if (p.IsControl(id)) return 2;
  if (p.IsUnused(id)) return 3;
  if (p.IsByte(id)) return 4;
  return 0;
}

int accel_spm_piece_to_id(void* processor, const char* piece, size_t size) {
  const Processor& p = processor_at(processor);
  const int id = p.PieceToId(std::string_view(piece, size));
  // PieceToId answers the unknown id for pieces it lacks.
  if (id == p.unk_id() && p.IdToPiece(id) != std::string_view(piece, size)) return -1;
  return id;
}

int accel_spm_special_id(void* processor, int which) {
  const Processor& p = processor_at(processor);
  switch (which) {
    case 0: return p.unk_id();
    case 1: return p.bos_id();
    case 2: return p.eos_id();
    case 3: return p.pad_id();
    default: return -1;
  }
}

}  // extern "C"
