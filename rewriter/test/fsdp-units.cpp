// fsdp-units (off by default; --fsdp-units=TypeA,TypeB names the types and enables it) starts every
// forward of the named FSDP unit types with acc::ForwardHooksGuard: C++ modules have no forward hooks,
// and FSDP FULL_SHARD gathers a unit's parameters around its forward through this seam.
// RUN: %acc-migrate --rules=fsdp-units --fsdp-units=Block,AttentionImpl,net::Head,Scale,Mix,Frozen,Guarded,Missing %s \
// RUN:   2>%t.err | FileCheck %s
// RUN: FileCheck --check-prefix=ERR %s < %t.err
// Running again on the output changes nothing: a body that declares the guard is left alone.
// RUN: rm -rf %t && mkdir -p %t && cp %s %t/units.cpp
// RUN: %acc-migrate --in-place --rules=fsdp-units --fsdp-units=Block,AttentionImpl,net::Head,Scale,Mix %t/units.cpp
// RUN: grep -v '^//' %t/units.cpp | grep -c 'acc::ForwardHooksGuard forward_hooks(\*this);' | FileCheck --check-prefix=COUNT %s
// COUNT: {{^}}6{{$}}
// RUN: %acc-migrate --rules=fsdp-units --fsdp-units=Block,AttentionImpl,net::Head,Scale,Mix %t/units.cpp \
// RUN:   > %t/again.diff 2>%t/again.err
// RUN: not grep . %t/again.diff
// RUN: not grep warning %t/again.err
// Off by default: the default rules leave every forward alone.
// RUN: %acc-migrate %s 2>/dev/null | FileCheck --check-prefix=DEFAULT %s --allow-empty
// DEFAULT-NOT: ForwardHooksGuard
#include <torch/torch.h>
#include <acc/hooks.h>
// The edit spells acc::, so include-acc adds acc/acc.h after the torch include.
// CHECK: {{^}} #include <torch/torch.h>
// CHECK-NEXT: {{^}}+#include <acc/acc.h>
// CHECK-NEXT: {{^}} #include <acc/hooks.h>

// TORCH_MODULE(Block) makes Block a holder of BlockImpl: naming Block edits BlockImpl's forward, in
// the class, indented like its first statement.
struct BlockImpl : torch::nn::Module {
  torch::Tensor forward(torch::Tensor x) {
    auto y = x * 2.0;
    return y;
  }
};
TORCH_MODULE(Block);
// CHECK: {{^}}   torch::Tensor forward(torch::Tensor x) {
// CHECK-NEXT: {{^}}+    acc::ForwardHooksGuard forward_hooks(*this);
// CHECK-NEXT: {{^}}     auto y = x * 2.0;

// The Impl name given as such; two overloads, one in the class on one line, one out of line (declared
// in the class, defined below).
struct AttentionImpl : torch::nn::Module {
  torch::Tensor forward(torch::Tensor x) { return forward(x, x); }
  torch::Tensor forward(torch::Tensor q, torch::Tensor k);
};
// CHECK: {{^}}-  torch::Tensor forward(torch::Tensor x) { return forward(x, x); }
// CHECK-NEXT: {{^}}+  torch::Tensor forward(torch::Tensor x) { acc::ForwardHooksGuard forward_hooks(*this); return forward(x, x); }

torch::Tensor AttentionImpl::forward(torch::Tensor q, torch::Tensor k) {

	// tab-indented, after a blank line and before a comment
	return q + k;
}
// CHECK: {{^}} torch::Tensor AttentionImpl::forward(torch::Tensor q, torch::Tensor k) {
// CHECK-NEXT: {{^}}+{{	}}acc::ForwardHooksGuard forward_hooks(*this);
// CHECK-NEXT: {{^}} {{$}}

// A qualified name (net::Head) and a class template (Scale<T>): the template's text is edited once,
// whatever instantiates it; a member template forward too.
namespace net {
struct HeadImpl : torch::nn::Module {
  template <typename T>
  torch::Tensor forward(T x) {
    return x;
  }
};
}  // namespace net
// CHECK: {{^}}   torch::Tensor forward(T x) {
// CHECK-NEXT: {{^}}+    acc::ForwardHooksGuard forward_hooks(*this);
// CHECK-NEXT: {{^}}     return x;
template <typename T>
struct ScaleImpl : torch::nn::Module {
  torch::Tensor forward(torch::Tensor x) {
    return x * T(2);
  }
};
template struct ScaleImpl<float>;
template struct ScaleImpl<double>;
// CHECK: {{^}}   torch::Tensor forward(torch::Tensor x) {
// CHECK-NEXT: {{^}}+    acc::ForwardHooksGuard forward_hooks(*this);
// CHECK-NEXT: {{^}}     return x * T(2);
// CHECK-NOT: {{^}}+{{.*}}ForwardHooksGuard{{.*}}ForwardHooksGuard
// A Module base that depends on the arguments: an instantiation shows the template is a module.
template <typename Base>
struct MixImpl : Base {
  torch::Tensor forward(torch::Tensor x) { return x; }
};
template struct MixImpl<torch::nn::Module>;
// CHECK: {{^}}+  torch::Tensor forward(torch::Tensor x) { acc::ForwardHooksGuard forward_hooks(*this); return x; }

torch::Tensor run(net::HeadImpl &head, torch::Tensor x) { return head.forward(x) + head.forward<const torch::Tensor &>(x); }

// A module not named: untouched.
struct MlpImpl : torch::nn::Module {
  torch::Tensor forward(torch::Tensor x) {
    return x;
  }
};
// CHECK-NOT: {{^}}+{{.*}}ForwardHooksGuard

// Named, but already guarded: untouched (the guard need not be first).
struct GuardedImpl : torch::nn::Module {
  torch::Tensor forward(torch::Tensor x) {
    auto y = x;
    acc::ForwardHooksGuard guard(*this);
    return y;
  }
};

// A const forward cannot hand the guard its module: reported, not edited.
struct FrozenImpl : torch::nn::Module {
  torch::Tensor forward(torch::Tensor x) const {
    return x;
  }
};
// CHECK-NOT: {{^}}+{{.*}}ForwardHooksGuard

// Named but not a module (no torch::nn::Module base): not an FSDP unit, so Missing is not found.
struct Missing {
  torch::Tensor forward(torch::Tensor x) {
    return x;
  }
};

// Each guard is explained; the const forward is reported; a named type no file defines is named.
// ERR: fsdp-units.cpp:[[@LINE-96]]:17: fsdp-units: the forward of FSDP unit BlockImpl now starts with acc::ForwardHooksGuard; FSDP FULL_SHARD gathers this unit's parameters before its forward and releases them after; C++ modules have no forward hooks
// ERR: fsdp-units.cpp:[[@LINE-84]]:17: fsdp-units: the forward of FSDP unit AttentionImpl now starts with acc::ForwardHooksGuard
// ERR: fsdp-units.cpp:[[@LINE-79]]:30: fsdp-units: the forward of FSDP unit AttentionImpl now starts with acc::ForwardHooksGuard
// ERR: fsdp-units.cpp:[[@LINE-66]]:17: fsdp-units: the forward of FSDP unit HeadImpl now starts with acc::ForwardHooksGuard
// ERR: fsdp-units.cpp:[[@LINE-57]]:17: fsdp-units: the forward of FSDP unit ScaleImpl now starts with acc::ForwardHooksGuard
// ERR: fsdp-units.cpp:[[@LINE-45]]:17: fsdp-units: the forward of FSDP unit MixImpl now starts with acc::ForwardHooksGuard
// ERR-NOT: GuardedImpl
// ERR: fsdp-units.cpp:[[@LINE-21]]:17: fsdp-units: FSDP unit FrozenImpl's forward is const: acc::ForwardHooksGuard runs the hooks of the module it is given{{.*}}; make it a non-static, non-const member function and start it with `acc::ForwardHooksGuard forward_hooks(*this);`
// ERR: acc-migrate: warning: --fsdp-units: no migrated file defines a forward of 'Missing' (looked for classes Missing and MissingImpl deriving from torch::nn::Module, with a forward body, {{.*}}); its forward gets no acc::ForwardHooksGuard
// ERR-NOT: warning
// ERR: acc-migrate: 1 file(s) changed (7 edit(s)), 1 of 1 source(s) parsed, 0 failed; 8 finding(s) to review
