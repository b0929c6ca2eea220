; Hand-written example plan: tell me which cities are warmer than 20 degrees,
; and count them. Run it with:
;   llassembly run examples/weather.asm --tools examples.weather_tools:TOOLS
section .rodata
    paris db "Paris", 0
    oslo  db "Oslo", 0
    cairo db "Cairo", 0
    warm  db "warm city", 0

section .text
    MOV R10, 0              ; number of warm cities
    PUSH paris
    CALL check_city
    PUSH oslo
    CALL check_city
    PUSH cairo
    CALL check_city
    SAY "{R10} of 3 cities are warmer than 20 degrees."
    HLT

check_city:                 ; takes a city name on the stack
    POP R1
    PUSH R1
    CALL get_temperature
    POP R2                  ; temperature
    CMP R2, 20
    JLE .done
    INC R10
    PUSH warm
    PUSH R2
    CALL notify
.done:
    RET
