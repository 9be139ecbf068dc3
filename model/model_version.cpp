// Placeholder so the model library exists before its first reader lands.
namespace qforge {
int model_library_version() { return 1; }
}  // namespace qforge
