# Project-wide compiler settings: -O2 release builds, warnings as errors,
# optional sanitizers. Every target in the tree inherits these.
set(CMAKE_C_FLAGS_RELEASE "-O2 -g")
set(CMAKE_C_FLAGS_RELWITHDEBINFO "-O2 -g")

add_compile_options(
  -Wall -Wextra -Werror -Wshadow -Wformat=2 -Wstrict-prototypes
  -Wmissing-prototypes -Wno-unused-parameter -fno-strict-aliasing
  -fvisibility=hidden)

if(GPUSLICE_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=undefined
                      -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
endif()
