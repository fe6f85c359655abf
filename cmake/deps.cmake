# The dependencies. Each failure names the Debian package to install.
#   BLIS      (cmake/FindBLIS.cmake, target BLIS::BLIS)      the engine's products
#   xxHash    (cmake/FindxxHash.cmake, target xxHash::xxhash) nn's checkpoints, the vocabularies
#   Threads   (Threads::Threads)                              the engine's thread pool
#   CUnit     (tg::cunit, only when the tests are built)
# The two Find modules are installed with the package (cmake/install.cmake), so an outside
# project finds BLIS and xxHash exactly as this build did.
list(PREPEND CMAKE_MODULE_PATH "${CMAKE_CURRENT_LIST_DIR}")

find_package(BLIS REQUIRED)
find_package(xxHash REQUIRED)
set(THREADS_PREFER_PTHREAD_FLAG ON)
find_package(Threads REQUIRED)

if(TG_BUILD_TESTS)
  find_path(CUNIT_INCLUDE_DIR CUnit/CUnit.h)
  find_library(CUNIT_LIBRARY NAMES cunit)
  if(NOT CUNIT_INCLUDE_DIR OR NOT CUNIT_LIBRARY)
    message(FATAL_ERROR "CUnit not found (CUnit/CUnit.h / libcunit), needed by the tests. "
                        "Install it: apt-get install libcunit1-dev (or configure with -DTG_BUILD_TESTS=OFF)")
  endif()
  add_library(tg::cunit INTERFACE IMPORTED)
  set_target_properties(tg::cunit PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${CUNIT_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES "${CUNIT_LIBRARY}")
endif()

# SentencePiece (C++), for the programs' subword vocabularies (zoo/app/subword.h): only the
# programs and the tests link it, through the static library tg_zoo_subword; the installed
# libraries never do (Debian ships no static libsentencepiece).
if(TG_BUILD_PROGRAMS)
  include(CheckLanguage)
  check_language(CXX)
  if(NOT CMAKE_CXX_COMPILER)
    message(FATAL_ERROR "No C++ compiler, needed by the programs' SentencePiece shim "
                        "(zoo/app/subword.cc). Install it: apt-get install g++ "
                        "(or configure with -DTG_BUILD_PROGRAMS=OFF)")
  endif()
  enable_language(CXX)
  find_path(SENTENCEPIECE_INCLUDE_DIR sentencepiece_processor.h)
  find_library(SENTENCEPIECE_LIBRARY NAMES sentencepiece)
  find_library(SENTENCEPIECE_TRAIN_LIBRARY NAMES sentencepiece_train)
  if(NOT SENTENCEPIECE_INCLUDE_DIR OR NOT SENTENCEPIECE_LIBRARY OR NOT SENTENCEPIECE_TRAIN_LIBRARY)
    message(FATAL_ERROR "SentencePiece not found (sentencepiece_processor.h, libsentencepiece, "
                        "libsentencepiece_train), needed by the programs' subword vocabularies. "
                        "Install it: apt-get install libsentencepiece-dev "
                        "(or configure with -DTG_BUILD_PROGRAMS=OFF)")
  endif()
  add_library(tg::sentencepiece INTERFACE IMPORTED)
  set_target_properties(tg::sentencepiece PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${SENTENCEPIECE_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES "${SENTENCEPIECE_TRAIN_LIBRARY};${SENTENCEPIECE_LIBRARY}")
endif()
