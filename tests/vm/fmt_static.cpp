// {fmt} for the VM's statically linked programs: Debian 12 ships libfmt only as a shared
// library (libfmt9; libfmt-dev has no libfmt.a), so this unit compiles the library's
// non-template functions from the header libfmt-dev installs for that (fmt/format-inl.h, not
// header-only: they are defined once, here), and instantiates the templates its headers
// declare but leave to the library (format.h: dragonbox::to_decimal, thousands_sep_impl,
// decimal_point_impl; core.h: locale_ref's constructor and get).
#include <fmt/format-inl.h>

namespace fmt::detail {

template auto dragonbox::to_decimal(float x) noexcept -> dragonbox::decimal_fp<float>;
template auto dragonbox::to_decimal(double x) noexcept -> dragonbox::decimal_fp<double>;
template locale_ref::locale_ref(const std::locale& loc);
template auto locale_ref::get<std::locale>() const -> std::locale;
template auto thousands_sep_impl(locale_ref) -> thousands_sep_result<char>;
template auto decimal_point_impl(locale_ref) -> char;

}  // namespace fmt::detail
