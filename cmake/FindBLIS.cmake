# FindBLIS -- finds BLIS (https://github.com/flame/blis), which ships neither a CMake package
# nor, on Debian, a blis.pc. Installed with tapegrad (lib/cmake/tapegrad/) and used by its
# package configuration, so a program that links tapegrad::ag finds BLIS the same way.
#
# Prefers Debian's serial build (libblis-serial-dev: the lowest per-call cost, never fights the
# caller's threads), then whatever BLIS the search finds (the build selected by Debian's
# alternatives system, or BLIS_ROOT / CMAKE_PREFIX_PATH elsewhere).
#
# Result: BLIS_FOUND, BLIS_INCLUDE_DIR, BLIS_LIBRARY, BLIS_NEEDS, and the imported target
# BLIS::BLIS. BLIS_NEEDS says what a static link of the library found must add, read from the
# symbols it leaves undefined (nm): "OpenMP" (GOMP_ / omp_ symbols: an OpenMP build such as
# Debian's libblis-openmp-dev), "Threads" (pthread_ symbols: the serial and pthreads builds),
# or "" (none, or no nm). BLIS::BLIS carries it (OpenMP::OpenMP_C or Threads::Threads, and
# libm), so a program linking tapegrad's static libraries gets -fopenmp or -pthread.
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

if(BLIS_FOUND AND NOT DEFINED BLIS_NEEDS)
  set(BLIS_NEEDS "")
  get_filename_component(_tg_blis_real "${BLIS_LIBRARY}" REALPATH)
  set(_tg_nm "${CMAKE_NM}")
  if(NOT _tg_nm)
    find_program(_tg_nm NAMES nm)
  endif()
  set(_tg_blis_undef "")
  if(_tg_nm)
    set(_tg_nm_dyn "")
    if(NOT _tg_blis_real MATCHES "\\.a$")
      set(_tg_nm_dyn -D)
    endif()
    execute_process(COMMAND "${_tg_nm}" ${_tg_nm_dyn} --undefined-only "${_tg_blis_real}"
      OUTPUT_VARIABLE _tg_blis_undef ERROR_QUIET)
  endif()
  if(_tg_blis_undef MATCHES "GOMP_|omp_get_")
    set(BLIS_NEEDS OpenMP)
  elseif(_tg_blis_undef MATCHES "pthread_")
    set(BLIS_NEEDS Threads)
  endif()
endif()

if(BLIS_FOUND AND NOT TARGET BLIS::BLIS)
  set(_tg_blis_links m)
  if(BLIS_NEEDS STREQUAL "OpenMP")
    find_package(OpenMP QUIET COMPONENTS C)
    if(TARGET OpenMP::OpenMP_C)
      list(APPEND _tg_blis_links OpenMP::OpenMP_C)
    else()
      list(APPEND _tg_blis_links gomp) # the compiler's OpenMP runtime (gcc's libgomp)
      set(BLIS_NEEDS "Threads;OpenMP")
    endif()
  endif()
  if("Threads" IN_LIST BLIS_NEEDS)
    set(THREADS_PREFER_PTHREAD_FLAG ON)
    find_package(Threads QUIET)
    if(TARGET Threads::Threads)
      list(APPEND _tg_blis_links Threads::Threads)
    endif()
  endif()
  add_library(BLIS::BLIS UNKNOWN IMPORTED)
  set_target_properties(BLIS::BLIS PROPERTIES
    IMPORTED_LOCATION "${BLIS_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${BLIS_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES "${_tg_blis_links}")
endif()
