# shellcheck shell=bash
# Sourced by the scripts of `make test`: the one reading of the CI variable. A CI
# run is CI set to anything but "", "false" or "0"; there, everything must run.
in_ci() {
  case "${CI:-}" in
    "" | false | 0) return 1 ;;
    *) return 0 ;;
  esac
}
