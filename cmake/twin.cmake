# tg_twin_library(NAME [SINGLE] SOURCES src... [DEPS lib...] [EXTERNAL dep...])
#
# Builds one of tapegrad's libraries. NAME is its short name (ag, nn, optim, datasets, zoo ...);
# each library is also a component of the installed CMake package and a pkg-config module.
#
# Twice, unless SINGLE: NAME computes in float32 (the product) and NAME64 in float64 (defines
# TG_DOUBLE, used by the gradient checks); a float64 library links the float64 twins of its
# DEPS, so a whole model can be compiled in double precision. Libraries without a precision
# (ag_base, datasets) are SINGLE; a twin links them as they are.
#
# For each variant L (NAME, NAME64):
#   tg_L_objects  OBJECT  the sources compiled once (position-independent when TG_BUILD_SHARED)
#   tg_L          STATIC  libtapegrad_L.a           the programs and tests link this one
#   tg_L_shared   SHARED  libtapegrad_L.so.<major>  when TG_BUILD_SHARED (SONAME and version)
# and the names to link, here and in an installed package alike:
#   tapegrad::L_static, tapegrad::L_shared, and tapegrad::L, which is the static library in a
#   build tree (in-tree, vendored with add_subdirectory) and the shared one once installed
#   (tapegradConfig.cmake; -Dtapegrad_USE_STATIC_LIBS=ON makes it the static one there too).
# DEPS: other tapegrad libraries by short name (PUBLIC: their headers are included by ours).
# EXTERNAL: BLIS::BLIS, xxHash::xxhash, Threads::Threads, m (PRIVATE: no public header includes
#   them; a static library passes them on as link-only dependencies).
#
# Compile options of the build (warnings, -march=native, TG_DEBUG_ASSERTS ...) are
# directory-scoped in this project and never part of a target's interface, so they never reach a
# consumer.
function(tg_twin_library name)
  cmake_parse_arguments(T "SINGLE" "" "SOURCES;DEPS;EXTERNAL" ${ARGN})
  foreach(v "" "64")
    if(v STREQUAL "64" AND T_SINGLE)
      continue()
    endif()
    set(lib ${name}${v})
    set(static_deps "")
    set(shared_deps "")
    foreach(d IN LISTS T_DEPS)
      if(TARGET tg_${d}${v})
        set(d ${d}${v})
      elseif(NOT TARGET tg_${d})
        message(FATAL_ERROR "tg_twin_library(${name}): unknown tapegrad library '${d}' in DEPS")
      endif()
      list(APPEND static_deps tg_${d})
      list(APPEND shared_deps tg_${d}_shared)
    endforeach()

    set(obj tg_${lib}_objects)
    add_library(${obj} OBJECT ${T_SOURCES})
    set(kinds ${obj} tg_${lib})
    add_library(tg_${lib} STATIC $<TARGET_OBJECTS:${obj}>)
    target_link_libraries(tg_${lib} PUBLIC ${static_deps} PRIVATE ${T_EXTERNAL})
    set_target_properties(tg_${lib} PROPERTIES OUTPUT_NAME tapegrad_${lib} EXPORT_NAME ${lib}_static)
    add_library(tapegrad::${lib} ALIAS tg_${lib})
    add_library(tapegrad::${lib}_static ALIAS tg_${lib})
    if(TG_BUILD_SHARED)
      set_target_properties(${obj} PROPERTIES POSITION_INDEPENDENT_CODE ON)
      if(CMAKE_C_COMPILER_ID STREQUAL "GNU")
        # PIC code without the cost of assuming that our own functions may be interposed.
        target_compile_options(${obj} PRIVATE -fno-semantic-interposition)
      endif()
      add_library(tg_${lib}_shared SHARED $<TARGET_OBJECTS:${obj}>)
      target_link_libraries(tg_${lib}_shared PUBLIC ${shared_deps} PRIVATE ${T_EXTERNAL})
      set_target_properties(tg_${lib}_shared PROPERTIES
        OUTPUT_NAME tapegrad_${lib} EXPORT_NAME ${lib}_shared
        VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR}
        INSTALL_RPATH "$ORIGIN")
      add_library(tapegrad::${lib}_shared ALIAS tg_${lib}_shared)
      list(APPEND kinds tg_${lib}_shared)
    endif()
    # Compiling needs what the dependencies' headers need; the objects take it from the static
    # libraries (an object library links nothing itself).
    target_link_libraries(${obj} PUBLIC ${static_deps} ${T_EXTERNAL})
    foreach(k IN LISTS kinds)
      target_include_directories(${k} PUBLIC
        $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
        $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/include>
        $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
      if(v STREQUAL "64")
        target_compile_definitions(${k} PUBLIC TG_DOUBLE=1)
      endif()
    endforeach()
    # The library's old, unprefixed name (ag, nn64, zoo ...), for the build's own CMake files,
    # only when tapegrad is the top-level project (never in a consumer's namespace).
    if(TG_TOP_LEVEL)
      add_library(${lib} ALIAS tg_${lib})
    endif()
  endforeach()

  # The package and pkg-config metadata (cmake/install.cmake reads these).
  set_property(GLOBAL APPEND PROPERTY TG_COMPONENTS ${name})
  set_property(GLOBAL PROPERTY TG_COMPONENT_SINGLE_${name} ${T_SINGLE})
  set_property(GLOBAL PROPERTY TG_COMPONENT_DEPS_${name} "${T_DEPS}")
  set_property(GLOBAL PROPERTY TG_COMPONENT_EXTERNAL_${name} "${T_EXTERNAL}")
  if(TG_INSTALL)
    foreach(v "" "64")
      if(v STREQUAL "64" AND T_SINGLE)
        continue()
      endif()
      set(targets tg_${name}${v})
      if(TG_BUILD_SHARED)
        list(APPEND targets tg_${name}${v}_shared)
      endif()
      install(TARGETS ${targets} EXPORT tapegrad-${name}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_COMPONENT dev)
    endforeach()
    install(EXPORT tapegrad-${name} NAMESPACE tapegrad::
      DESTINATION ${TG_INSTALL_CMAKEDIR} FILE tapegrad-${name}-targets.cmake COMPONENT dev)
  endif()
endfunction()
