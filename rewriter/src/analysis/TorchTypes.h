// Type questions about libtorch and acc, answered from the AST (never from spelling): a tensor is
// at::TensorBase or derived, a model derives from torch::nn::Module, an optimizer from
// torch::optim::Optimizer, and so on, seen through references, pointers, shared_ptr/unique_ptr and
// TORCH_MODULE holders.
#pragma once
#include <clang/AST/DeclCXX.h>
#include <clang/AST/Expr.h>
#include <clang/AST/Type.h>
#include <llvm/ADT/StringRef.h>

namespace accmigrate {

// How a variable holds the object it names; decides how it is passed to accelerator.prepare.
enum class Holding { Value, Pointer, SmartPointer, Holder };

// `rd` is the class `qualifiedName` or derives from it (directly or not).
bool derivesFrom(const clang::CXXRecordDecl *rd, llvm::StringRef qualifiedName);

// The class behind `type` once references, cv-qualifiers and sugar are gone (null if none).
const clang::CXXRecordDecl *recordOf(clang::QualType type);

bool isTensor(clang::QualType type);
bool isDeviceClass(clang::QualType type);  // c10::Device
bool isDeviceType(clang::QualType type);   // c10::DeviceType
bool isScalarType(clang::QualType type);   // c10::ScalarType (torch::Dtype)
bool isDataLoader(clang::QualType type);   // torch::data::DataLoaderBase and derived, acc::DataLoader
bool isAccelerator(clang::QualType type);  // acc::Accelerator

// The object class that `type` holds, if it derives from `base`, with how it is held.
const clang::CXXRecordDecl *heldClass(clang::QualType type, llvm::StringRef base, Holding *holding);
inline const clang::CXXRecordDecl *moduleClass(clang::QualType t, Holding *h = nullptr) {
  return heldClass(t, "torch::nn::Module", h);
}
inline const clang::CXXRecordDecl *optimizerClass(clang::QualType t, Holding *h = nullptr) {
  return heldClass(t, "torch::optim::Optimizer", h);
}
// libtorch's LR schedulers: LRScheduler's subclasses, and ReduceLROnPlateauScheduler, which it declares
// apart (no base; `step(float metric)`).
constexpr const char *kSchedulerBases[] = {"torch::optim::LRScheduler", "torch::optim::ReduceLROnPlateauScheduler"};
inline const clang::CXXRecordDecl *schedulerClass(clang::QualType t, Holding *h = nullptr) {
  for (const char *base : kSchedulerBases)
    if (const clang::CXXRecordDecl *rd = heldClass(t, base, h)) return rd;
  return nullptr;
}

// `e` without the conversions the compiler added (implicit casts, temporaries, converting
// constructors such as Device -> TensorOptions), i.e. the expression as the user wrote it.
const clang::Expr *asWritten(const clang::Expr *e);

// `e` names the CPU: torch::kCPU, Device(kCPU), "cpu", or a variable initialised so.
bool isCpuDevice(const clang::Expr *e);

// `e` spells CUDA itself (torch::kCUDA, Device(kCUDA, 0), "cuda:0"), not through a variable.
bool isLiteralCudaDevice(const clang::Expr *e);

// The function (or method) declared in namespace/class `qualifiedName`, e.g. "torch::save".
bool isFunctionNamed(const clang::FunctionDecl *fn, llvm::StringRef qualifiedName);

}  // namespace accmigrate
