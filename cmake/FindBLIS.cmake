# FindBLIS -- finds BLIS (https://github.com/flame/blis), which ships neither a CMake package
# nor, on Debian, a blis.pc. Installed with tapegrad (lib/cmake/tapegrad/) and used by its
# package configuration, so a program that links tapegrad::ag finds BLIS the same way.
#
# Prefers Debian's serial build (libblis-serial-dev: the lowest per-call cost, never fights the
# caller's threads), then whatever BLIS the search finds (the build selected by Debian's
# alternatives system, or BLIS_ROOT / CMAKE_PREFIX_PATH elsewhere).
#
# Result: BLIS_FOUND, BLIS_INCLUDE_DIR, BLIS_LIBRARY, and the imported target BLIS::BLIS.
include(FindPackageHandleStandardArgs)

set(_tg_blis_serial_inc "")
set(_tg_blis_serial_lib "")
if(CMAKE_LIBRARY_ARCHITECTURE)
  set(_tg_blis_serial_inc /usr/include/${CMAKE_LIBRARY_ARCHITECTURE}/blis-serial)
  set(_tg_blis_serial_lib /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/blis-serial)
endif()
find_path(BLIS_INCLUDE_DIR blis.h PATHS ${_tg_blis_serial_inc} NO_DEFAULT_PATH)
find_path(BLIS_INCLUDE_DIR blis.h PATH_SUFFIXES blis)
find_library(BLIS_LIBRARY NAMES blis PATHS ${_tg_blis_serial_lib} NO_DEFAULT_PATH)
find_library(BLIS_LIBRARY NAMES blis)
mark_as_advanced(BLIS_INCLUDE_DIR BLIS_LIBRARY)

find_package_handle_standard_args(BLIS
  REQUIRED_VARS BLIS_LIBRARY BLIS_INCLUDE_DIR
  REASON_FAILURE_MESSAGE
    "BLIS (blis.h, libblis) is needed. Install it: apt-get install libblis-serial-dev (Debian), or point BLIS_ROOT at an installed BLIS.")

if(BLIS_FOUND AND NOT TARGET BLIS::BLIS)
  add_library(BLIS::BLIS UNKNOWN IMPORTED)
  set_target_properties(BLIS::BLIS PROPERTIES
    IMPORTED_LOCATION "${BLIS_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${BLIS_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES "m")
endif()
