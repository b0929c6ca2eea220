section .rodata
    city        db "Oslo", 0
    nine_fifths dd 1.8
    thirty_two  dd 32.0
    fifty       dd 50.0
section .text
    push city
    call get_temperature
    movd xmm0, eax
    mulss xmm0, [nine_fifths]
    addss xmm0, [thirty_two]      ; degrees Fahrenheit
    cvtss2si eax, xmm0
    push eax
    call set_display
    comiss xmm0, [fifty]
    jnb .done                     ; 50 F or more: no heating
    push 2
    call set_heater
.done:
    hlt
