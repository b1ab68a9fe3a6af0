# Sourced by the action's steps: inputs checked before any use, and values written to
# $GITHUB_ENV and $GITHUB_OUTPUT between random delimiters, so no input can add a variable
# (BASH_ENV, PATH) or a workflow command (GitHub's hardening guide for actions).

# refuse NAME VALUE [ALLOWED]: one ::error:: line and exit 2 when VALUE has a control
# character (a newline ends a line of $GITHUB_ENV) or, for a ref or a path, starts with "-"
# (an option to git or realpath). ALLOWED=list lets a list input keep newlines and tabs.
refuse() {
  local name=$1 value=$2 allowed=${3:-}
  [ "$allowed" = list ] && value=${value//[$'\n\t']/ }
  if [[ $value == *[[:cntrl:]]* ]]; then
    echo "::error::servegate: input '$name' holds a control character: refused"
    exit 2
  fi
  if [ "$allowed" != list ] && [[ $value == -* ]]; then
    echo "::error::servegate: input '$name' starts with '-': refused (a ref or a path)"
    exit 2
  fi
}

# put FILE NAME VALUE: NAME=VALUE into a GitHub file ($GITHUB_ENV, $GITHUB_OUTPUT) between
# a random delimiter that VALUE cannot hold.
put() {
  local file=$1 name=$2 value=$3 delim
  delim="servegate_$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
  printf '%s<<%s\n%s\n%s\n' "$name" "$delim" "$value" "$delim" >>"$file"
}
