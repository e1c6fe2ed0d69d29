# Shell helper for the bench scripts that regenerate a clone with one knob changed. Source it, then:
#   set_knob FILE SECTION KEY VALUE
# sets KEY in FILE's [SECTION] (a knobs TOML, as `ditto generate --knobs` reads it) to VALUE, adding
# the key to its section when FILE was written before the key existed (an older tune history's or
# clone's knobs).

set_knob() {
  local file=$1 section=$2 key=$3 value=$4
  if sed -n "/^\[$section\]/,/^\[/p" "$file" | grep -q "^$key = "; then
    sed -i "/^\[$section\]/,/^\[/ s/^$key = .*/$key = $value/" "$file"
  else
    sed -i "/^\[$section\]/a $key = $value" "$file"
  fi
}
